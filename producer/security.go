package producer

import (
	"crypto/tls"
	"fmt"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Java's security properties, so a pasted client config connects the same
// way: security.protocol, sasl.mechanism and sasl.jaas.config (PLAIN and
// SCRAM login modules). The typed TLS and SASL options take precedence.

var securityProperties = []property{
	{"security.protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", func(c *config, v string) error {
		switch strings.ToUpper(v) {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			c.securityProtocol = strings.ToUpper(v)
			return nil
		}
		return fmt.Errorf("must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
	}},
	{"sasl.mechanism", "PLAIN", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", func(c *config, v string) error {
		switch strings.ToUpper(v) {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			c.saslMechanism = strings.ToUpper(v)
			return nil
		}
		return fmt.Errorf("must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
	}},
	{"sasl.jaas.config", "", `login module with username="..." password="..." (PlainLoginModule or ScramLoginModule)`, func(c *config, v string) error {
		if v == "" {
			c.saslUser, c.saslPass = "", ""
			return nil
		}
		user, pass, ok := parseJAAS(v)
		if !ok {
			return fmt.Errorf(`want a login module with username="..." and password="..."`)
		}
		c.saslUser, c.saslPass = user, pass
		return nil
	}},
}

var jaasField = regexp.MustCompile(`(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// parseJAAS pulls username and password out of a JAAS line such as
// org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
func parseJAAS(s string) (user, pass string, ok bool) {
	var haveUser, havePass bool
	for _, m := range jaasField.FindAllStringSubmatch(s, -1) {
		val := strings.ReplaceAll(strings.ReplaceAll(m[2], `\"`, `"`), `\\`, `\`)
		if m[1] == "username" {
			user, haveUser = val, true
		} else {
			pass, havePass = val, true
		}
	}
	return user, pass, haveUser && havePass
}

// applySecurity turns the security properties into the TLS config and SASL
// mechanism, unless the typed options set them.
func (c *config) applySecurity() error {
	proto := c.securityProtocol
	if c.tls == nil && (proto == "SSL" || proto == "SASL_SSL") {
		c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.sasl != nil || (proto != "SASL_PLAINTEXT" && proto != "SASL_SSL") {
		return nil
	}
	if c.saslUser == "" && c.saslPass == "" {
		return &ConfigError{Property: "sasl.jaas.config", Reason: "required when security.protocol is " + proto}
	}
	switch c.saslMechanism {
	case "SCRAM-SHA-256":
		c.sasl = scram.Auth{User: c.saslUser, Pass: c.saslPass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		c.sasl = scram.Auth{User: c.saslUser, Pass: c.saslPass}.AsSha512Mechanism()
	default:
		c.sasl = plain.Auth{User: c.saslUser, Pass: c.saslPass}.AsMechanism()
	}
	return nil
}

var _ sasl.Mechanism = plain.Auth{}.AsMechanism()
