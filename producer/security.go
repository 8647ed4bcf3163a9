package producer

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/longhaul-kafka/longhaul/internal/jaas"
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
	{"sasl.mechanism", "PLAIN", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with the lhoauth.ClientCredentials option (module producer/plugin/lhoauth), or AWS_MSK_IAM with the lhaws.MSKIAM option (module producer/plugin/lhaws)", func(c *config, v string) error {
		switch strings.ToUpper(v) {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", mskIAM:
			c.saslMechanism = strings.ToUpper(v)
			return nil
		}
		return fmt.Errorf("must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM")
	}},
	{"sasl.jaas.config", "", `login module with username="..." password="..." (PlainLoginModule, ScramLoginModule), or clientId="..." clientSecret="..." [scope="..."] (OAuthBearerLoginModule), or IAMLoginModule (AWS_MSK_IAM, without options)`, func(c *config, v string) error {
		c.jaas = nil
		if strings.TrimSpace(v) == "" {
			return nil
		}
		e, err := jaas.Parse(v)
		if err != nil {
			return err
		}
		fields := e.Options
		if e.Module == iamLoginModule {
			// AWS_MSK_IAM: the credentials come from the provider given
			// to lhaws.MSKIAM. Options naming another identity cannot be
			// honoured here; ignoring them would log in as the wrong one.
			if len(fields) > 0 {
				k := sortedKeys(fields)[0] // the same one every run
				return fmt.Errorf("IAMLoginModule option %s: give lhaws.MSKIAM a credentials provider for that profile or role instead "+
					"(config.WithSharedConfigProfile, stscreds.NewAssumeRoleProvider)", k)
			}
			c.jaas = fields
			return nil
		}
		if len(fields) == 0 {
			return fmt.Errorf(`want a login module with username="..." password="...", or clientId="..." clientSecret="..."`)
		}
		c.jaas = fields
		return nil
	}},
	{"sasl.client.callback.handler.class", "", "only " + iamCallbackHandler + " (AWS_MSK_IAM configs pasted from Java; lhaws.MSKIAM does its job) or empty: Java classes cannot run here", func(c *config, v string) error {
		switch strings.TrimSpace(v) {
		case "", iamCallbackHandler:
			return nil
		}
		return fmt.Errorf("a Java callback handler class cannot run here; for OAUTHBEARER use sasl.oauthbearer.token.endpoint.url with the lhoauth.ClientCredentials option, or the SASL option with a token source")
	}},
	{"sasl.oauthbearer.token.endpoint.url", "", "OAUTHBEARER: the OAuth 2 token endpoint; with the lhoauth.ClientCredentials option (module producer/plugin/lhoauth) tokens are fetched with the client credentials grant (clientId, clientSecret, scope from sasl.jaas.config)", func(c *config, v string) error {
		if v != "" {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("want an http(s) URL")
			}
		}
		c.oauthTokenURL = v
		return nil
	}},
}, sslProperties...)

// applySecurity turns the security properties into the TLS config and SASL
// mechanism, unless the typed options set them.
func (c *config) applySecurity() error {
	proto := c.securityProtocol
	if c.tls == nil && (proto == "SSL" || proto == "SASL_SSL") {
		cfg, err := sslTLS(&c.ssl)
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
	if c.sasl != nil && c.tls == nil && c.logger != nil {
		// Once per producer: New validates once.
		switch c.sasl.Name() {
		case "PLAIN":
			c.logger.Warn("SASL PLAIN without TLS sends the password in clear text; use security.protocol=SASL_SSL or the TLS option",
				"mechanism", "PLAIN")
		case mskIAM:
			// The payload is a request signed for 15 minutes: whoever
			// reads it can log in as us until then.
			c.logger.Warn("AWS_MSK_IAM without TLS sends a signed login that others can replay for 15 minutes in clear text; MSK's IAM listener needs security.protocol=SASL_SSL or the TLS option",
				"mechanism", mskIAM)
		}
	}
	return nil
}

// AWS MSK IAM names, as in the Java configs MSK documents.
const (
	mskIAM             = "AWS_MSK_IAM"
	iamLoginModule     = "software.amazon.msk.auth.iam.IAMLoginModule"
	iamCallbackHandler = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
)

// errMSKIAMOption is the reason for sasl.mechanism=AWS_MSK_IAM without a
// SASL option. The core module does not read AWS credentials: a partial
// chain (say, only the AWS_ACCESS_KEY_ID environment variables) would
// differ from the Java IAMLoginModule's default chain (profiles, SSO, web
// identity, container and instance roles) that MSK users rely on, and the
// whole chain needs the AWS SDK, which lhaws brings in its own module.
const errMSKIAMOption = "AWS_MSK_IAM needs the lhaws.MSKIAM option (module github.com/longhaul-kafka/longhaul/producer/plugin/lhaws) " +
	"with an aws-sdk-go-v2 credentials provider, e.g. lhaws.MSKIAM(cfg.Credentials) after config.LoadDefaultConfig"

// errOAuthOption is the reason for sasl.mechanism=OAUTHBEARER without a
// SASL option. Fetching tokens takes an HTTP and OAuth 2 client that only
// OAUTHBEARER users need, so it lives in the lhoauth module; connecting
// without a token instead would fail every record at the broker.
const errOAuthOption = "OAUTHBEARER from properties needs the lhoauth.ClientCredentials option " +
	"(module github.com/longhaul-kafka/longhaul/producer/plugin/lhoauth), which fetches tokens from " +
	"sasl.oauthbearer.token.endpoint.url with the clientId and clientSecret of sasl.jaas.config; " +
	"or pass the SASL option with oauth.Oauth from franz-go's pkg/sasl/oauth for another token source"

// SASLProperties are the SASL settings of a producer's properties, as
// [SASLFromProperties] hands them to a plugin module.
type SASLProperties struct {
	Mechanism        string            // sasl.mechanism, upper case
	JAAS             map[string]string // the options of sasl.jaas.config's login module (a copy); nil when it is not set
	TokenEndpointURL string            // sasl.oauthbearer.token.endpoint.url; "" when it is not set
}

// SASLFromProperties returns an option through which a plugin module
// builds the SASL mechanism named mechanism (for example "OAUTHBEARER")
// from the properties, as lhoauth.ClientCredentials does. New calls build
// once, after every property and option is applied, when
// security.protocol is SASL_PLAINTEXT or SASL_SSL, sasl.mechanism is
// mechanism (case-insensitive) and no [SASL] option is given: a SASL
// option takes precedence, as it does over the properties. A later
// SASLFromProperties for the same mechanism replaces an earlier one. An
// error from build fails New: a [*ConfigError] as it is, another error,
// or a nil mechanism, as a ConfigError naming sasl.mechanism.
func SASLFromProperties(mechanism string, build func(SASLProperties) (sasl.Mechanism, error)) Opt {
	return optFunc(func(c *config) error {
		if c.saslBuilders == nil {
			c.saslBuilders = map[string]func(SASLProperties) (sasl.Mechanism, error){}
		}
		c.saslBuilders[strings.ToUpper(mechanism)] = build
		return nil
	})
}

// buildSASL sets c.sasl from a plugin's builder (SASLFromProperties).
func (c *config) buildSASL(build func(SASLProperties) (sasl.Mechanism, error)) error {
	m, err := build(SASLProperties{Mechanism: c.saslMechanism, JAAS: maps.Clone(c.jaas), TokenEndpointURL: c.oauthTokenURL})
	if ce := (*ConfigError)(nil); errors.As(err, &ce) {
		return ce
	}
	if err == nil && m == nil {
		err = errors.New("the SASLFromProperties function returned no mechanism")
	}
	if err != nil {
		return &ConfigError{Property: "sasl.mechanism", Value: c.saslMechanism, Reason: err.Error()}
	}
	c.sasl = m
	return nil
}

// saslFromProperties builds the SASL mechanism from sasl.mechanism and
// sasl.jaas.config.
func (c *config) saslFromProperties(proto string) error {
	if c.saslMechanism == mskIAM {
		return &ConfigError{Property: "sasl.mechanism", Value: mskIAM, Reason: errMSKIAMOption}
	}
	if build := c.saslBuilders[c.saslMechanism]; build != nil {
		return c.buildSASL(build)
	}
	if c.saslMechanism == "OAUTHBEARER" {
		return &ConfigError{Property: "sasl.mechanism", Value: "OAUTHBEARER", Reason: errOAuthOption}
	}
	user, haveUser := c.jaas["username"]
	pass, havePass := c.jaas["password"]
	if !haveUser || !havePass {
		return &ConfigError{Property: "sasl.jaas.config", Reason: `username="..." and password="..." required when security.protocol is ` + proto}
	}
	switch c.saslMechanism {
	case "SCRAM-SHA-256":
		c.sasl = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		c.sasl = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	default:
		c.sasl = plain.Auth{User: user, Pass: pass}.AsMechanism()
	}
	return nil
}

var _ sasl.Mechanism = plain.Auth{}.AsMechanism()
