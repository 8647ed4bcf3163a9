package producer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
)

func TestFatalDialError(t *testing.T) {
	ca, err := testcerts.NewCA("x")
	require.NoError(t, err)
	wrap := func(err error) error {
		return fmt.Errorf("producer: no broker reachable: protocol: dial 127.0.0.1:9093: %w", err)
	}
	fatal := []error{
		fmt.Errorf("sasl PLAIN: %w: Authentication failed: Invalid username or password", kerr.SaslAuthenticationFailed),
		fmt.Errorf("sasl handshake PLAIN (broker offers [SCRAM-SHA-512]): %w", kerr.UnsupportedSaslMechanism),
		&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{Cert: ca.Cert}},
		x509.HostnameError{Certificate: ca.Cert, Host: "h"},
		x509.CertificateInvalidError{Cert: ca.Cert, Reason: x509.Expired},
		tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"},
		&net.OpError{Op: "remote error", Err: errors.New("tls: unknown certificate authority")},
	}
	for _, err := range fatal {
		assert.True(t, fatalDialError(wrap(err)), "%v", err)
		assert.ErrorIs(t, fatalCause(wrap(err)), ErrAuthentication)
	}
	transient := []error{
		io.EOF,
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
		context.DeadlineExceeded,
		fmt.Errorf("metadata: %w", kerr.NotLeaderForPartition),
		kerr.CoordinatorNotAvailable,
		nil,
	}
	for _, err := range transient {
		assert.False(t, fatalDialError(err), "%v", err)
		assert.NoError(t, fatalCause(err))
	}
}

// TestTLSVerificationFailureFailsFast: records waiting for a broker whose
// certificate we do not trust fail with ErrAuthentication and the x509
// cause, long before delivery.timeout.ms (10 minutes here).
func TestTLSVerificationFailureFailsFast(t *testing.T) {
	k := newPKI(t)
	other, err := testcerts.NewCA("someone else")
	require.NoError(t, err)
	expired, err := k.ca.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"127.0.0.1"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	require.NoError(t, err)
	untrusted, err := other.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	wrongHost, err := k.ca.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"kafka.example.com"}})
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		leaf *testcerts.Leaf
		is   func(error) bool
	}{
		{"untrusted CA", untrusted, func(err error) bool { var e x509.UnknownAuthorityError; return errors.As(err, &e) }},
		{"expired", expired, func(err error) bool {
			var e x509.CertificateInvalidError
			return errors.As(err, &e) && e.Reason == x509.Expired
		}},
		{"wrong host", wrongHost, func(err error) bool { var e x509.HostnameError; return errors.As(err, &e) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := tlsServer(t, tc.leaf, nil)
			p, err := New(BootstrapServers(addr), TLS(&tls.Config{RootCAs: k.ca.Pool()}),
				DeliveryTimeout(10*time.Minute), RetryBackoff(50*time.Millisecond))
			require.NoError(t, err)
			defer closeSoon(p)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = produceWait(ctx, p, &Record{Topic: "t", Value: []byte("v")}, &Record{Topic: "u", Value: []byte("w")})
			require.ErrorIs(t, err, ErrAuthentication, "want a fast authentication failure, not a timeout")
			assert.NotErrorIs(t, err, ErrDeliveryTimeout)
			assert.True(t, tc.is(err), "the cause says which check failed: %v", err)
			var de *DeliveryError
			require.ErrorAs(t, err, &de)
			assert.False(t, de.FateUnknown, "never sent")
		})
	}
}

// TestUnreachableBrokerIsNotFatal is the negative control: a refused
// connection is retried until delivery.timeout.ms, not failed at once.
func TestUnreachableBrokerIsNotFatal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	p, err := New(BootstrapServers(addr), TLS(&tls.Config{}),
		DeliveryTimeout(1500*time.Millisecond), RequestTimeout(time.Second), Linger(0), RetryBackoff(50*time.Millisecond))
	require.NoError(t, err)
	defer p.Close(context.Background())
	err = p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("v")}).FirstErr()
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	assert.NotErrorIs(t, err, ErrAuthentication)
}

// produceWait produces records and returns the first error, or ctx's error
// if ctx ends before every callback ran.
func produceWait(ctx context.Context, p *Producer, recs ...*Record) error {
	errs := make(chan error, len(recs))
	for _, r := range recs {
		p.Produce(ctx, r, func(_ *Record, err error) { errs <- err })
	}
	var first error
	for range recs {
		select {
		case err := <-errs:
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return fmt.Errorf("records not called back: %w", ctx.Err())
		}
	}
	return first
}

// closeSoon closes p, giving up on flushing after a few seconds.
func closeSoon(p *Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Close(ctx)
}

// TestOAuthBearerNeedsThePlugin: OAUTHBEARER from properties without a
// SASL option fails New with a ConfigError naming sasl.mechanism and the
// lhoauth option that fetches tokens, rather than connecting without one.
func TestOAuthBearerNeedsThePlugin(t *testing.T) {
	_, err := NewFromProperties(oauthProps())
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sasl.mechanism", ce.Property)
	assert.Equal(t, "OAUTHBEARER", ce.Value)
	assert.Contains(t, ce.Reason, "lhoauth.ClientCredentials")
	assert.Contains(t, ce.Reason, "producer/plugin/lhoauth")

	// A SASL option is the other way out.
	m := oauthProps()
	p, err := NewFromProperties(m, SASL(plain.Auth{User: "u", Pass: "p"}.AsMechanism()))
	require.NoError(t, err)
	assert.Equal(t, "PLAIN", p.cfg.sasl.Name())
	closeSoon(p)

	// The endpoint is checked whether or not OAUTHBEARER is used.
	m = map[string]string{"sasl.oauthbearer.token.endpoint.url": "login.example.com/token"}
	m["bootstrap.servers"] = "127.0.0.1:1"
	_, err = NewFromProperties(m)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sasl.oauthbearer.token.endpoint.url", ce.Property)
}

func oauthProps() map[string]string {
	return map[string]string{
		"bootstrap.servers":                   "127.0.0.1:1",
		"security.protocol":                   "SASL_SSL",
		"sasl.mechanism":                      "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url": "https://login.example.com/token",
		"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="id" clientSecret="s" scope="kafka";`,
	}
}

// TestSASLFromProperties: the builder of SASLFromProperties is called
// once, with the settings as the properties and options left them, only
// for its mechanism over SASL_PLAINTEXT or SASL_SSL and only without a
// SASL option; its errors reach New as ConfigErrors.
func TestSASLFromProperties(t *testing.T) {
	var calls []SASLProperties
	mech := oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: "x"}, nil })
	build := func(sp SASLProperties) (sasl.Mechanism, error) {
		calls = append(calls, sp)
		sp.JAAS["clientId"] = "changed" // a copy: the producer's is untouched
		return mech, nil
	}
	c, err := configFrom(oauthProps(), SASLFromProperties("oauthbearer", build),
		Property("sasl.oauthbearer.token.endpoint.url", "https://other.example.com/token"))
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, SASLProperties{Mechanism: "OAUTHBEARER", TokenEndpointURL: "https://other.example.com/token",
		JAAS: map[string]string{"clientId": "changed", "clientSecret": "s", "scope": "kafka"}}, calls[0])
	assert.Equal(t, "id", c.jaas["clientId"])
	assert.Equal(t, "OAUTHBEARER", c.sasl.Name())

	for name, props := range map[string]map[string]string{
		"PLAINTEXT": func() map[string]string { m := oauthProps(); m["security.protocol"] = "SSL"; return m }(),
		"PLAIN": func() map[string]string {
			m := oauthProps()
			m["sasl.mechanism"] = "PLAIN"
			m["sasl.jaas.config"] = `x.PlainLoginModule required username="u" password="p";`
			return m
		}(),
	} {
		calls = nil
		_, err := configFrom(props, SASLFromProperties("OAUTHBEARER", build))
		require.NoError(t, err, name)
		assert.Empty(t, calls, name)
	}
	calls = nil
	c, err = configFrom(oauthProps(), SASLFromProperties("OAUTHBEARER", build), SASL(plain.Auth{User: "u", Pass: "p"}.AsMechanism()))
	require.NoError(t, err)
	assert.Empty(t, calls, "the SASL option takes precedence")
	assert.Equal(t, "PLAIN", c.sasl.Name())

	// A later builder for the same mechanism replaces an earlier one.
	other := 0
	_, err = configFrom(oauthProps(), SASLFromProperties("OAUTHBEARER", build),
		SASLFromProperties("OAUTHBEARER", func(SASLProperties) (sasl.Mechanism, error) { other++; return mech, nil }))
	require.NoError(t, err)
	assert.Equal(t, 1, other)

	for name, tc := range map[string]struct {
		build    func(SASLProperties) (sasl.Mechanism, error)
		property string
		reason   string
	}{
		"ConfigError as is": {func(SASLProperties) (sasl.Mechanism, error) {
			return nil, &ConfigError{Property: "sasl.jaas.config", Reason: "needs clientId"}
		}, "sasl.jaas.config", "needs clientId"},
		"other error":   {func(SASLProperties) (sasl.Mechanism, error) { return nil, errors.New("no luck") }, "sasl.mechanism", "no luck"},
		"nil mechanism": {func(SASLProperties) (sasl.Mechanism, error) { return nil, nil }, "sasl.mechanism", "returned no mechanism"},
	} {
		_, err := configFrom(oauthProps(), SASLFromProperties("OAUTHBEARER", tc.build))
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, name)
		assert.Equal(t, tc.property, ce.Property, name)
		assert.Contains(t, ce.Reason, tc.reason, name)
	}
}

// TestJAASErrorsReachConfigError: a value Java rejects is a ConfigError
// naming sasl.jaas.config, saying what is wrong.
func TestJAASErrorsReachConfigError(t *testing.T) {
	_, err := NewFromProperties(map[string]string{"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
		"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p"`})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "sasl.jaas.config", ce.Property)
	require.Contains(t, ce.Reason, "';'")
}
