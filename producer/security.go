package producer

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

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
	{"sasl.mechanism", "PLAIN", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, or AWS_MSK_IAM with the lhaws.MSKIAM option (module producer/plugin/lhaws)", func(c *config, v string) error {
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
		return fmt.Errorf("a Java callback handler class cannot run here; for OAUTHBEARER use sasl.oauthbearer.token.endpoint.url or the SASL option with a token source")
	}},
	{"sasl.oauthbearer.token.endpoint.url", "", "OAUTHBEARER: the OAuth 2 token endpoint; tokens are fetched with the client credentials grant (clientId, clientSecret, scope from sasl.jaas.config)", func(c *config, v string) error {
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

// saslFromProperties builds the SASL mechanism from sasl.mechanism and
// sasl.jaas.config.
func (c *config) saslFromProperties(proto string) error {
	if c.saslMechanism == mskIAM {
		return &ConfigError{Property: "sasl.mechanism", Value: mskIAM, Reason: errMSKIAMOption}
	}
	if c.saslMechanism == "OAUTHBEARER" {
		return c.oauthFromProperties()
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

// oauthFromProperties builds OAUTHBEARER with tokens from the token
// endpoint by the client credentials grant. The token source caches a
// token and fetches a new one when it is about to expire, so every new
// connection logs in with a valid token.
func (c *config) oauthFromProperties() error {
	if c.oauthTokenURL == "" {
		return &ConfigError{Property: "sasl.oauthbearer.token.endpoint.url",
			Reason: "required with sasl.mechanism=OAUTHBEARER (or pass the SASL option with oauth.Oauth from franz-go's pkg/sasl/oauth for another token source)"}
	}
	id, secret := c.jaas["clientId"], c.jaas["clientSecret"]
	if id == "" || secret == "" {
		return &ConfigError{Property: "sasl.jaas.config", Reason: `OAuthBearerLoginModule needs clientId="..." and clientSecret="..."`}
	}
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: c.oauthTokenURL}
	if scope := c.jaas["scope"]; scope != "" {
		cc.Scopes = strings.Fields(strings.ReplaceAll(scope, ",", " "))
	}
	// Fetched with the dial's context, not a TokenSource's (fixed at
	// creation, and Background here): a stalled endpoint then ends with
	// the dial, and Close, which waits for dials, is not held by it. One
	// dial fetches at a time, so concurrent dials share a token; the others
	// wait for it until their own context ends.
	var (
		turn   = make(chan struct{}, 1) // held while using cached
		cached *oauth2.Token
	)
	tokenURL := c.oauthTokenURL
	c.sasl = oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		select {
		case turn <- struct{}{}:
		case <-ctx.Done():
			return oauth.Auth{}, fmt.Errorf("oauthbearer token from %s: %w", tokenURL, ctx.Err())
		}
		defer func() { <-turn }()
		if !cached.Valid() { // nil, or expiring within oauth2's 10 s margin
			tok, err := cc.Token(ctx)
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("oauthbearer token from %s: %w", tokenURL, err)
			}
			cached = tok
		}
		return oauth.Auth{Token: cached.AccessToken}, nil
	})
	return nil
}

var _ sasl.Mechanism = plain.Auth{}.AsMechanism()
