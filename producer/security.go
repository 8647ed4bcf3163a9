package producer

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ErrAuthentication is the cause of records failed because connecting
// failed authentication or TLS verification: wrong SASL credentials or
// mechanism, a broker certificate that is not trusted, is for another host
// or has expired, or a client certificate the broker rejects. Records
// waiting for such a connection fail at once, not after
// delivery.timeout.ms; the error wraps the one from the handshake, whose
// text says which check failed. The producer keeps reconnecting with
// backoff, as the Java client does.
var ErrAuthentication = errors.New("producer: authentication or TLS verification failed")

// Java's security properties, so a pasted client config connects the same
// way: security.protocol, sasl.mechanism and sasl.jaas.config (PLAIN and
// SCRAM login modules). The typed TLS and SASL options take precedence.

var securityProperties = append([]property{
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
}, sslProperties...)

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
		cfg, err := c.ssl.tlsConfig()
		if err != nil {
			return err
		}
		c.tls = cfg
	}
	if c.sasl == nil && (proto == "SASL_PLAINTEXT" || proto == "SASL_SSL") {
		if err := c.saslFromProperties(proto); err != nil {
			return err
		}
	}
	if c.sasl != nil && c.tls == nil && c.sasl.Name() == "PLAIN" && c.logger != nil {
		// Once per producer: New validates once.
		c.logger.Warn("SASL PLAIN without TLS sends the password in clear text; use security.protocol=SASL_SSL or the TLS option",
			"mechanism", "PLAIN")
	}
	return nil
}

// saslFromProperties builds the SASL mechanism from sasl.mechanism and
// sasl.jaas.config.
func (c *config) saslFromProperties(proto string) error {
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
