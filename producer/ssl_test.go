package producer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pki is a CA, a server certificate for 127.0.0.1/localhost and a client
// certificate, all issued by the CA.
type pki struct {
	ca             *testcerts.CA
	server, client *testcerts.Leaf
	dir            string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := testcerts.NewCA("longhaul test CA")
	require.NoError(t, err)
	server, err := ca.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"127.0.0.1", "localhost"}})
	require.NoError(t, err)
	client, err := ca.Issue(testcerts.LeafOptions{CommonName: "alice", Client: true})
	require.NoError(t, err)
	return &pki{ca: ca, server: server, client: client, dir: t.TempDir()}
}

func (k *pki) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(k.dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// tlsServer accepts TLS connections with leaf and, if clientCAs is set,
// requires a client certificate it signed. Each accepted connection's
// handshake result is sent on the returned channel (nil: it succeeded).
func tlsServer(t *testing.T, leaf *testcerts.Leaf, clientCAs *x509.CertPool) (addr string, results <-chan error) {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	ch, done := make(chan error, 16), make(chan struct{})
	t.Cleanup(func() { ln.Close(); close(done) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				err := c.(*tls.Conn).Handshake()
				if err == nil {
					// TLS 1.3 servers check the client certificate after
					// the client's handshake returns; a read sees it.
					c.Write([]byte("x"))
				}
				select {
				case ch <- err:
				case <-done: // nobody reads any more (a test that dials often leaves the buffer full)
				}
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// tlsFromProperties builds the producer's TLS config from properties, as
// New does.
func tlsFromProperties(props map[string]string) (*tls.Config, error) {
	c := defaultConfig()
	c.bootstrap = []string{"127.0.0.1:9092"}
	for k, v := range props {
		if err := c.setProperty(k, v); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c.tls, nil
}

// handshake dials addr with cfg as the producer does (server name from the
// address) and reads one byte, so a rejected client certificate shows.
func handshake(addr string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 1))
	return err
}

func TestSSLPropertiesPEMFilesMutualTLS(t *testing.T) {
	k := newPKI(t)
	addr, results := tlsServer(t, k.server, k.ca.Pool())
	keystore := k.write(t, "client.pem", append(k.client.KeyPEM(), k.client.ChainPEM()...))
	cfg, err := tlsFromProperties(map[string]string{
		"security.protocol":       "SSL",
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": k.write(t, "ca.pem", k.ca.CertPEM()),
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   keystore,
	})
	require.NoError(t, err)
	require.NoError(t, handshake(addr, cfg))
	require.NoError(t, <-results)

	// Negative control: without the key store the server rejects us.
	cfg, err = tlsFromProperties(map[string]string{
		"security.protocol":       "SSL",
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": filepath.Join(k.dir, "ca.pem"),
	})
	require.NoError(t, err)
	require.Error(t, handshake(addr, cfg))
	require.Error(t, <-results)
}

func TestSSLPropertiesInlinePEMEncryptedKey(t *testing.T) {
	k := newPKI(t)
	addr, results := tlsServer(t, k.server, k.ca.Pool())
	props := map[string]string{
		"security.protocol":              "SSL",
		"ssl.truststore.type":            "PEM",
		"ssl.truststore.certificates":    string(k.ca.CertPEM()),
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.certificate.chain": string(k.client.ChainPEM()),
		"ssl.keystore.key":               string(k.client.EncryptedKeyPEM("s3cret")),
		"ssl.key.password":               "s3cret",
	}
	cfg, err := tlsFromProperties(props)
	require.NoError(t, err)
	require.NoError(t, handshake(addr, cfg))
	require.NoError(t, <-results)

	props["ssl.key.password"] = "wrong"
	_, err = tlsFromProperties(props)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ssl.key.password", ce.Property)
	assert.Contains(t, err.Error(), "wrong password")

	delete(props, "ssl.key.password")
	_, err = tlsFromProperties(props)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ssl.key.password", ce.Property)
	assert.Contains(t, err.Error(), "encrypted")
}

func TestSSLPropertiesPKCS12(t *testing.T) {
	k := newPKI(t)
	addr, results := tlsServer(t, k.server, k.ca.Pool())
	ks, err := testcerts.PKCS12(k.client.Key, []*x509.Certificate{k.client.Cert, k.ca.Cert}, "kspass")
	require.NoError(t, err)
	ts, err := testcerts.PKCS12TrustStore([]*x509.Certificate{k.ca.Cert})
	require.NoError(t, err)
	ksPath, tsPath := k.write(t, "client.p12", ks), k.write(t, "trust.p12", ts)

	for _, typ := range []string{"PKCS12", "JKS"} { // JKS, Java's default, reads PKCS12 files as Java 9+ does
		t.Run(typ, func(t *testing.T) {
			props := map[string]string{
				"security.protocol":       "SASL_SSL",
				"sasl.jaas.config":        `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`,
				"ssl.truststore.type":     typ,
				"ssl.truststore.location": tsPath,
				"ssl.truststore.password": "tspass",
				"ssl.keystore.type":       typ,
				"ssl.keystore.location":   ksPath,
				"ssl.keystore.password":   "kspass",
			}
			cfg, err := tlsFromProperties(props)
			require.NoError(t, err)
			require.NoError(t, handshake(addr, cfg))
			require.NoError(t, <-results)

			props["ssl.keystore.password"] = "nope"
			_, err = tlsFromProperties(props)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "ssl.keystore.location", ce.Property)
			assert.Contains(t, err.Error(), "ssl.keystore.password")
		})
	}
}

func TestSSLPropertiesRejectJKS(t *testing.T) {
	k := newPKI(t)
	jks := k.write(t, "trust.jks", append([]byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, make([]byte, 64)...))
	_, err := tlsFromProperties(map[string]string{
		"security.protocol":       "SSL",
		"ssl.truststore.location": jks,
	})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ssl.truststore.location", ce.Property)
	assert.Contains(t, err.Error(), "JKS")
	assert.Contains(t, err.Error(), "keytool -importkeystore")
}

func TestSSLPropertiesBadInput(t *testing.T) {
	k := newPKI(t)
	ca := k.write(t, "ca.pem", k.ca.CertPEM())
	cases := []struct {
		name  string
		props map[string]string
		prop  string
	}{
		{"missing file", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": filepath.Join(k.dir, "nope.pem")}, "ssl.truststore.location"},
		{"not PEM", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": k.write(t, "junk", []byte("junk"))}, "ssl.truststore.location"},
		{"inline needs PEM type", map[string]string{"ssl.truststore.certificates": string(k.ca.CertPEM())}, "ssl.truststore.certificates"},
		{"inline and file", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(k.ca.CertPEM()), "ssl.truststore.location": ca}, "ssl.truststore.certificates"},
		{"chain without key", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(k.client.ChainPEM())}, "ssl.keystore.key"},
		{"key of another cert", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(k.client.ChainPEM()), "ssl.keystore.key": string(k.server.KeyPEM())}, "ssl.keystore.key"},
		{"PEM keystore password", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": k.write(t, "c.pem", append(k.client.KeyPEM(), k.client.ChainPEM()...)), "ssl.keystore.password": "x"}, "ssl.keystore.password"},
		{"old TLS", map[string]string{"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "ssl.enabled.protocols"},
		{"no TLS version", map[string]string{"ssl.enabled.protocols": ""}, "ssl.enabled.protocols"},
		{"endpoint algorithm", map[string]string{"ssl.endpoint.identification.algorithm": "ldaps"}, "ssl.endpoint.identification.algorithm"},
		{"store type", map[string]string{"ssl.keystore.type": "BKS"}, "ssl.keystore.type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{"security.protocol": "SSL"}
			for k, v := range tc.props {
				props[k] = v
			}
			_, err := tlsFromProperties(props)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.prop, ce.Property, "%v", err)
		})
	}
}

func TestSSLPropertiesVersions(t *testing.T) {
	for _, tc := range []struct {
		v        string
		min, max uint16
	}{
		{"TLSv1.2,TLSv1.3", tls.VersionTLS12, tls.VersionTLS13},
		{"TLSv1.3", tls.VersionTLS13, tls.VersionTLS13},
		{"TLSv1.2", tls.VersionTLS12, tls.VersionTLS12},
	} {
		cfg, err := tlsFromProperties(map[string]string{"security.protocol": "SSL", "ssl.enabled.protocols": tc.v})
		require.NoError(t, err)
		assert.Equal(t, tc.min, cfg.MinVersion, tc.v)
		assert.Equal(t, tc.max, cfg.MaxVersion, tc.v)
		assert.False(t, cfg.InsecureSkipVerify, tc.v)
		assert.Nil(t, cfg.RootCAs, "no trust store: the system roots")
	}
}

// TestSSLVerificationAlwaysOn: the default checks chain and host name; an
// empty ssl.endpoint.identification.algorithm drops only the host check.
func TestSSLVerificationAlwaysOn(t *testing.T) {
	k := newPKI(t)
	other, err := testcerts.NewCA("someone else")
	require.NoError(t, err)
	wrongHost, err := k.ca.Issue(testcerts.LeafOptions{CommonName: "elsewhere", Hosts: []string{"kafka.example.com"}})
	require.NoError(t, err)
	untrusted, err := other.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	expired, err := k.ca.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"127.0.0.1"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	require.NoError(t, err)
	caPath := k.write(t, "ca.pem", k.ca.CertPEM())

	for _, endpoint := range []string{"https", ""} {
		cfg, err := tlsFromProperties(map[string]string{"security.protocol": "SSL",
			"ssl.truststore.type": "PEM", "ssl.truststore.location": caPath,
			"ssl.endpoint.identification.algorithm": endpoint})
		require.NoError(t, err)
		check := func(leaf *testcerts.Leaf, want func(error) bool, what string) {
			t.Helper()
			addr, _ := tlsServer(t, leaf, nil)
			err := handshake(addr, cfg)
			assert.True(t, want(err), "endpoint %q, %s: got %v", endpoint, what, err)
		}
		ok := func(err error) bool { return err == nil }
		isUnknownCA := func(err error) bool { var e x509.UnknownAuthorityError; return errors.As(err, &e) }
		isExpired := func(err error) bool {
			var e x509.CertificateInvalidError
			return errors.As(err, &e) && e.Reason == x509.Expired
		}
		isHostname := func(err error) bool { var e x509.HostnameError; return errors.As(err, &e) }
		check(k.server, ok, "good certificate")
		check(untrusted, isUnknownCA, "untrusted CA")
		check(expired, isExpired, "expired")
		if endpoint == "https" {
			check(wrongHost, isHostname, "wrong host")
		} else {
			check(wrongHost, ok, "wrong host, host check off")
		}
		for _, err := range []error{handshakeErr(t, untrusted, cfg), handshakeErr(t, expired, cfg)} {
			assert.True(t, fatalDialError(err), "%v", err)
		}
	}
}

func handshakeErr(t *testing.T, leaf *testcerts.Leaf, cfg *tls.Config) error {
	addr, _ := tlsServer(t, leaf, nil)
	return handshake(addr, cfg)
}

func TestSSLPropertiesInTable(t *testing.T) {
	names := strings.Join(PropertyNames(), " ")
	for _, p := range sslProperties {
		assert.Contains(t, names, p.name)
		def, ok := PropertyDefault(p.name)
		require.True(t, ok)
		assert.Equal(t, p.def, def)
	}
	def, _ := PropertyDefault("ssl.endpoint.identification.algorithm")
	assert.Equal(t, "https", def, "Java's default: host names are checked")
}

// TestTLSOptionTakesACopy: the TLS option's doc says cfg is cloned, so
// the caller's later changes to it do not reach the producer's
// connections (nor race with their handshakes). The producer used the
// caller's value for every dial whose cfg named a ServerName, and a cfg
// whose trust was changed after New made the next dials fail verification.
func TestTLSOptionTakesACopy(t *testing.T) {
	k := newPKI(t)
	other, err := testcerts.NewCA("someone else")
	require.NoError(t, err)
	addr, results := tlsServer(t, k.server, nil)
	cfg := &tls.Config{RootCAs: k.ca.Pool(), ServerName: "127.0.0.1"}
	p, err := New(BootstrapServers(addr), TLS(cfg), DeliveryTimeout(10*time.Minute), RetryBackoff(50*time.Millisecond))
	require.NoError(t, err)
	defer closeSoon(p)
	// After New, the caller reuses its config for something else.
	cfg.RootCAs = other.Pool()
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, nil)
	select {
	case err := <-results:
		require.NoError(t, err, "the handshake used the caller's changed config")
	case <-time.After(time.Minute):
		t.Fatal("no handshake")
	}
}
