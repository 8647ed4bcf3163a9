package kafkatest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
	"github.com/longhaul-kafka/longhaul/producer"
)

// secEnv is one broker with every security listener, and the files a
// client needs.
type secEnv struct {
	c                *Cluster
	ca, otherCA      *testcerts.CA
	client           *testcerts.Leaf // trusted by the MTLS listener
	caPEM, clientPEM string          // files
	dir              string
}

const (
	clientKeyPassword = "client-key-pw"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// startSecure starts one node with listeners SSL, MTLS (client
// certificate required), SASL_PLAINTEXT, SASL_SSL, EXPIRED (an expired
// broker certificate), WRONGHOST (a certificate for kafka.example.com),
// OAUTH and REAUTH (PLAIN sessions of 3 s),
// PLAIN users alice and bob, and SCRAM-SHA-256/512 users scram256 and
// scram512.
func startSecure(t *testing.T) *secEnv {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("longhaul test CA")
	require.NoError(t, err)
	otherCA, err := testcerts.NewCA("some other CA")
	require.NoError(t, err)
	issue := func(o testcerts.LeafOptions) *testcerts.Leaf {
		l, err := ca.Issue(o)
		require.NoError(t, err)
		return l
	}
	hosts := []string{"127.0.0.1", "localhost"}
	good := issue(testcerts.LeafOptions{CommonName: "broker", Hosts: hosts})
	expired := issue(testcerts.LeafOptions{CommonName: "broker", Hosts: hosts,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	wrongHost := issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"kafka.example.com"}})
	client := issue(testcerts.LeafOptions{CommonName: "longhaul-client", Client: true})
	// Unencrypted: Java 17 cannot open PBES2-encrypted PKCS#8 keys
	// ("PBES2 SecretKeyFactory not available"); the producer's side of
	// encrypted keys is tested with the MTLS listener.
	store := func(name string, l *testcerts.Leaf) string {
		return writeFile(t, dir, name, append(l.KeyPEM(), l.ChainPEM()...))
	}
	caPEM := writeFile(t, dir, "ca.pem", ca.CertPEM())
	tlsGood := TLSListenerConfig(store("good.pem", good), "", "", "none")
	sasl := SASLListenerConfig(map[string]string{"alice": "alice-secret", "bob": "bob-secret"})
	c := Start(t, Options{Listeners: []Listener{
		{Name: "SSL", Protocol: "SSL", Config: tlsGood},
		{Name: "MTLS", Protocol: "SSL", Config: TLSListenerConfig(filepath.Join(dir, "good.pem"), "", caPEM, "required")},
		{Name: "SASL_PLAINTEXT", Protocol: "SASL_PLAINTEXT", Config: sasl},
		{Name: "SASL_SSL", Protocol: "SASL_SSL", Config: MergeConfig(sasl, tlsGood)},
		{Name: "EXPIRED", Protocol: "SSL", Config: TLSListenerConfig(store("expired.pem", expired), "", "", "none")},
		{Name: "WRONGHOST", Protocol: "SSL", Config: TLSListenerConfig(store("wronghost.pem", wrongHost), "", "", "none")},
		// Kafka's built-in unsecured OAUTHBEARER validator (test mode);
		// sessions last 3 s, then the broker closes the connection.
		{Name: "OAUTH", Protocol: "SASL_PLAINTEXT", Config: map[string]string{
			"sasl.enabled.mechanisms":               "OAUTHBEARER",
			"oauthbearer.sasl.jaas.config":          `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";`,
			"oauthbearer.connections.max.reauth.ms": "3000",
		}},
		// PLAIN sessions of 3 s (KIP-368): the producer renews them.
		{Name: "REAUTH", Protocol: "SASL_PLAINTEXT", Config: MergeConfig(sasl, map[string]string{
			"sasl.enabled.mechanisms":         "PLAIN",
			"plain.connections.max.reauth.ms": "3000",
		})},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.AddSCRAMUser(ctx, "SCRAM-SHA-256", "scram256", "scram256-secret"))
	require.NoError(t, c.AddSCRAMUser(ctx, "SCRAM-SHA-512", "scram512", "scram512-secret"))
	return &secEnv{c: c, ca: ca, otherCA: otherCA, client: client, caPEM: caPEM, dir: dir,
		clientPEM: writeFile(t, dir, "client.pem", append(client.KeyPEM(), client.ChainPEM()...))}
}

func jaas(mechanism, user, pass string) string {
	module := "org.apache.kafka.common.security.plain.PlainLoginModule"
	if strings.HasPrefix(mechanism, "SCRAM") {
		module = "org.apache.kafka.common.security.scram.ScramLoginModule"
	}
	return fmt.Sprintf(`%s required username=%q password=%q;`, module, user, pass)
}

// props turns a Java-style property map into options.
func props(m map[string]string) []producer.Opt {
	var opts []producer.Opt
	for k, v := range m {
		opts = append(opts, producer.Property(k, v))
	}
	return opts
}

// TestSecurity runs every security combination against one Kafka 4.4
// broker: each successful one produces records exactly once and in order;
// each misconfiguration fails fast with an error saying which check
// failed.
func TestSecurity(t *testing.T) {
	began := time.Now()
	e := startSecure(t)
	t.Logf("broker with 8 listeners up and SCRAM users created in %v", time.Since(began).Round(time.Millisecond))
	sslProps := map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": e.caPEM}

	ok := []struct {
		name     string
		listener string
		opts     []producer.Opt
	}{
		{"SSL properties", "SSL", props(MergeConfig(sslProps, map[string]string{"security.protocol": "SSL"}))},
		{"SSL typed option", "SSL", []producer.Opt{producer.TLS(&tls.Config{RootCAs: e.ca.Pool()})}},
		{"mTLS PEM file", "MTLS", props(MergeConfig(sslProps, map[string]string{"security.protocol": "SSL",
			"ssl.keystore.type": "PEM", "ssl.keystore.location": e.clientPEM}))},
		{"mTLS inline encrypted key", "MTLS", props(map[string]string{"security.protocol": "SSL",
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(e.ca.CertPEM()),
			"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(e.client.ChainPEM()),
			"ssl.keystore.key": string(e.client.EncryptedKeyPEM(clientKeyPassword)), "ssl.key.password": clientKeyPassword})},
	}
	for _, proto := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
		for _, u := range []struct{ mech, user, pass string }{
			{"PLAIN", "alice", "alice-secret"},
			{"SCRAM-SHA-256", "scram256", "scram256-secret"},
			{"SCRAM-SHA-512", "scram512", "scram512-secret"},
		} {
			m := map[string]string{"security.protocol": proto, "sasl.mechanism": u.mech, "sasl.jaas.config": jaas(u.mech, u.user, u.pass)}
			if proto == "SASL_SSL" {
				m = MergeConfig(m, sslProps)
			}
			ok = append(ok, struct {
				name     string
				listener string
				opts     []producer.Opt
			}{proto + " " + u.mech, proto, props(m)})
		}
	}
	ok = append(ok, struct {
		name     string
		listener string
		opts     []producer.Opt
	}{"SASL_SSL typed options", "SASL_SSL", []producer.Opt{producer.TLS(&tls.Config{RootCAs: e.ca.Pool()}),
		producer.SASL(scram.Auth{User: "scram512", Pass: "scram512-secret"}.AsSha512Mechanism())}})

	for i, tc := range ok {
		t.Run("ok/"+tc.name, func(t *testing.T) {
			const n, parts = 3000, 3
			topic := fmt.Sprintf("sec-%d", i)
			e.c.CreateTopic(t, topic, parts, 1, nil)
			p := newLonghaul(t, e.c.ListenerBootstrap(tc.listener), nil, append(tc.opts, producer.Linger(2*time.Millisecond), producer.BatchSize(4096))...)
			run := startLonghaul(p, topic, n, parts, 0)
			sent := run.wait(t, 2*time.Minute)
			require.Empty(t, run.failures())
			rep := checkLog(t, e.c, topic, parts, sent)
			assert.Equal(t, n, rep.Acked)
		})
	}

	bad := []struct {
		name     string
		listener string
		opts     []producer.Opt
		check    func(t *testing.T, err error)
	}{
		{"wrong password PLAIN", "SASL_SSL", props(MergeConfig(sslProps, map[string]string{"security.protocol": "SASL_SSL",
			"sasl.jaas.config": jaas("PLAIN", "alice", "not-alices")})), saslFailed},
		{"wrong password SCRAM", "SASL_PLAINTEXT", props(map[string]string{"security.protocol": "SASL_PLAINTEXT",
			"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas("SCRAM-SHA-256", "scram256", "nope")}), saslFailed},
		{"unknown user PLAIN", "SASL_PLAINTEXT", []producer.Opt{producer.SASL(plain.Auth{User: "mallory", Pass: "x"}.AsMechanism())}, saslFailed},
		{"unknown user SCRAM", "SASL_SSL", []producer.Opt{producer.TLS(&tls.Config{RootCAs: e.ca.Pool()}),
			producer.SASL(scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism())}, saslFailed},
		{"untrusted CA", "SSL", []producer.Opt{producer.TLS(&tls.Config{RootCAs: e.otherCA.Pool()})}, func(t *testing.T, err error) {
			var u x509.UnknownAuthorityError
			assert.ErrorAs(t, err, &u)
			assert.Contains(t, err.Error(), "certificate signed by unknown authority")
		}},
		{"wrong hostname", "WRONGHOST", props(MergeConfig(sslProps, map[string]string{"security.protocol": "SSL"})), func(t *testing.T, err error) {
			var h x509.HostnameError
			assert.ErrorAs(t, err, &h)
			assert.Contains(t, err.Error(), "cannot validate certificate for 127.0.0.1")
		}},
		{"expired certificate", "EXPIRED", props(MergeConfig(sslProps, map[string]string{"security.protocol": "SSL"})), func(t *testing.T, err error) {
			var inv x509.CertificateInvalidError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, x509.Expired, inv.Reason)
			assert.Contains(t, err.Error(), "expired")
		}},
		{"no client certificate", "MTLS", props(MergeConfig(sslProps, map[string]string{"security.protocol": "SSL"})), func(t *testing.T, err error) {
			assert.Contains(t, err.Error(), "remote error: tls:")
		}},
	}
	for _, tc := range bad {
		t.Run("fails/"+tc.name, func(t *testing.T) {
			p := newLonghaul(t, e.c.ListenerBootstrap(tc.listener), nil, tc.opts...) // delivery.timeout.ms 10 minutes
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := produceOne(ctx, p, "sec-0")
			t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
			require.ErrorIs(t, err, producer.ErrAuthentication)
			assert.NotErrorIs(t, err, producer.ErrDeliveryTimeout)
			tc.check(t, err)
		})
	}
	t.Run("ok/OAUTHBEARER token endpoint, tokens refreshed", func(t *testing.T) { testOAuthBearer(t, e) })
	t.Run("ok/PLAIN sessions renewed (KIP-368)", func(t *testing.T) { testReauth(t, e, true) })
	t.Run("negative/PLAIN sessions not renewed", func(t *testing.T) { testReauth(t, e, false) })
	t.Logf("TestSecurity wall time %v", time.Since(began).Round(time.Millisecond))
}

// testOAuthBearer produces for about 8 s over OAUTHBEARER with tokens from
// a client-credentials token endpoint run here, configured by the Java
// properties and fetched through SASLFromProperties (the way the lhoauth
// module plugs in; its own tests cover its token cache). Tokens live 12 s
// and one is fetched for every connection; sessions last 3 s and the
// producer renews each (KIP-368) on a new connection with a fresh token.
// All records arrive exactly once and in order.
func testOAuthBearer(t *testing.T, e *secEnv) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if r.FormValue("grant_type") != "client_credentials" || !ok || id != "lh-client" || secret != "lh-secret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":12}`, unsecuredJWT("lh-client", 12*time.Second))
	}))
	defer srv.Close()
	const n, parts = 4000, 2
	topic := "sec-oauth"
	e.c.CreateTopic(t, topic, parts, 1, nil)
	p := newLonghaul(t, e.c.ListenerBootstrap("OAUTH"), nil, append(props(map[string]string{
		"security.protocol":                   "SASL_PLAINTEXT",
		"sasl.mechanism":                      "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url": srv.URL + "/token",
		"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="lh-client" clientSecret="lh-secret";`,
	}), producer.SASLFromProperties("OAUTHBEARER", clientCredentials))...)
	run := startLonghaul(p, topic, n, parts, 5) // 500 records/s
	sent := run.wait(t, 2*time.Minute)
	require.Empty(t, run.failures())
	rep := checkLog(t, e.c, topic, parts, sent)
	assert.Equal(t, n, rep.Acked)
	t.Logf("token endpoint hits: %d", hits.Load())
	assert.GreaterOrEqual(t, hits.Load(), int64(2), "tokens were refreshed during the run")
}

// clientCredentials logs in with a token fetched, for each connection,
// from the endpoint and client of sp by the client credentials grant.
func clientCredentials(sp producer.SASLProperties) (sasl.Mechanism, error) {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		form := url.Values{"grant_type": {"client_credentials"}}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sp.TokenEndpointURL, strings.NewReader(form.Encode()))
		if err != nil {
			return oauth.Auth{}, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(sp.JAAS["clientId"], sp.JAAS["clientSecret"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return oauth.Auth{}, err
		}
		defer resp.Body.Close()
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK {
			return oauth.Auth{}, fmt.Errorf("token endpoint: %s, %v", resp.Status, err)
		}
		return oauth.Auth{Token: tok.AccessToken}, nil
	}), nil
}

// unsecuredJWT returns an unsigned JWT (alg none) for Kafka's unsecured
// OAUTHBEARER validator.
func unsecuredJWT(sub string, life time.Duration) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now()
	claims := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, now.Unix(), now.Add(life).Unix())
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

func saslFailed(t *testing.T, err error) {
	assert.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	assert.Contains(t, err.Error(), "Authentication failed")
}

// produceOne produces one record and waits for its callback or ctx.
func produceOne(ctx context.Context, p *producer.Producer, topic string) error {
	done := make(chan error, 1)
	p.Produce(ctx, &producer.Record{Topic: topic, Value: []byte("x")}, func(_ *producer.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err == nil {
			return errors.New("produced, want a failure")
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("no callback: %w", ctx.Err())
	}
}
