package producer

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/longhaul-kafka/longhaul/internal/keystore"
)

// Java's ssl.* properties: trust and key stores as PEM (files or inline
// text) or PKCS12 files, hostname verification and the TLS versions. They
// build the tls.Config when security.protocol is SSL or SASL_SSL and the
// TLS option is not given. JKS stores are rejected with a message saying
// how to convert them.

// sslTLS builds the tls.Config the ssl.* properties describe, reading the
// files once, in validate, so a bad file fails New with a ConfigError
// naming the property.
func sslTLS(s *keystore.Config) (*tls.Config, error) {
	cfg, err := s.TLS()
	var ke *keystore.Error
	if errors.As(err, &ke) {
		return nil, &ConfigError{Property: ke.Property, Reason: ke.Reason}
	}
	return cfg, err
}

func strSetter(store func(*keystore.Config, string)) func(*config, string) error {
	return func(c *config, v string) error { store(&c.ssl, v); return nil }
}

func storeTypeSetter(store func(*keystore.Config, string)) func(*config, string) error {
	return func(c *config, v string) error {
		switch t := strings.ToUpper(strings.TrimSpace(v)); t {
		case "PEM", "PKCS12", "JKS":
			store(&c.ssl, t)
			return nil
		}
		return fmt.Errorf("must be PEM, PKCS12 or JKS (JKS files are rejected when read: convert them to PKCS12 or PEM)")
	}
}

var sslProperties = []property{
	{"ssl.truststore.type", "JKS", "PEM or PKCS12; JKS (the Java default) reads PKCS12 files, as Java does, and rejects real JKS files",
		storeTypeSetter(func(s *keystore.Config, v string) { s.TruststoreType = v })},
	{"ssl.truststore.location", "", "file of CA certificates that verify brokers; empty = the system roots",
		strSetter(func(s *keystore.Config, v string) { s.TruststoreLocation = v })},
	{"ssl.truststore.password", "", "password of a PKCS12 trust store",
		strSetter(func(s *keystore.Config, v string) { s.TruststorePassword = v })},
	{"ssl.truststore.certificates", "", "CA certificates as PEM text (ssl.truststore.type=PEM), instead of a file",
		strSetter(func(s *keystore.Config, v string) { s.TruststoreCerts = v })},
	{"ssl.keystore.type", "JKS", "PEM or PKCS12; JKS (the Java default) reads PKCS12 files, as Java does, and rejects real JKS files",
		storeTypeSetter(func(s *keystore.Config, v string) { s.KeystoreType = v })},
	{"ssl.keystore.location", "", "file with the client's certificate chain and private key, for mutual TLS",
		strSetter(func(s *keystore.Config, v string) { s.KeystoreLocation = v })},
	{"ssl.keystore.password", "", "password of a PKCS12 key store (not used with PEM)",
		strSetter(func(s *keystore.Config, v string) { s.KeystorePassword = v })},
	{"ssl.keystore.certificate.chain", "", "client certificate chain as PEM text (ssl.keystore.type=PEM), with ssl.keystore.key",
		strSetter(func(s *keystore.Config, v string) { s.KeystoreChain = v })},
	{"ssl.keystore.key", "", "client private key as PKCS#8 PEM text (ssl.keystore.type=PEM), with ssl.keystore.certificate.chain",
		strSetter(func(s *keystore.Config, v string) { s.KeystoreKey = v })},
	{"ssl.key.password", "", "password of an encrypted PKCS#8 PEM private key",
		strSetter(func(s *keystore.Config, v string) { s.KeyPassword = v })},
	{"ssl.endpoint.identification.algorithm", "https", "https: check the broker's certificate matches its host name; empty: check only that a trusted CA signed it", func(c *config, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "https":
			c.ssl.VerifyHostname = true
		case "":
			c.ssl.VerifyHostname = false
		default:
			return fmt.Errorf("must be https or empty")
		}
		return nil
	}},
	{"ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "TLS versions allowed: TLSv1.2 and/or TLSv1.3", func(c *config, v string) error {
		var lo, hi uint16
		for _, s := range strings.Split(v, ",") {
			var ver uint16
			switch strings.TrimSpace(s) {
			case "":
				continue
			case "TLSv1.2":
				ver = tls.VersionTLS12
			case "TLSv1.3":
				ver = tls.VersionTLS13
			default:
				return fmt.Errorf("%q is not supported: only TLSv1.2 and TLSv1.3 (older versions are insecure)", strings.TrimSpace(s))
			}
			if lo == 0 || ver < lo {
				lo = ver
			}
			hi = max(hi, ver)
		}
		if lo == 0 {
			return fmt.Errorf("must name at least one of TLSv1.2, TLSv1.3")
		}
		c.ssl.MinVersion, c.ssl.MaxVersion = lo, hi
		return nil
	}},
}
