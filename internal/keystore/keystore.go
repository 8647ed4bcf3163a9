// Package keystore builds a TLS configuration from Java's ssl.* client
// settings: trust and key stores as PEM (files or inline text) or PKCS12
// files, PKCS#8 private keys (PBES2-encrypted ones too), hostname
// verification and the TLS versions. Java's own JKS and JCEKS files are
// rejected with a message saying how to convert them. Every error is an
// [*Error] naming the ssl.* property it is about.
package keystore

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Config holds the ssl.* settings as given; the store types are upper
// case: PEM, PKCS12 or JKS (read as PKCS12, as Java does).
type Config struct {
	TruststoreType     string // ssl.truststore.type
	TruststoreLocation string // ssl.truststore.location
	TruststorePassword string // ssl.truststore.password
	TruststoreCerts    string // ssl.truststore.certificates
	KeystoreType       string // ssl.keystore.type
	KeystoreLocation   string // ssl.keystore.location
	KeystorePassword   string // ssl.keystore.password
	KeystoreChain      string // ssl.keystore.certificate.chain
	KeystoreKey        string // ssl.keystore.key
	KeyPassword        string // ssl.key.password
	VerifyHostname     bool   // ssl.endpoint.identification.algorithm=https
	MinVersion         uint16 // lowest of ssl.enabled.protocols
	MaxVersion         uint16 // highest of ssl.enabled.protocols
}

// Error is a setting that cannot be used: Property names the ssl.*
// property, Reason says why.
type Error struct {
	Property string
	Reason   string
}

func (e *Error) Error() string { return e.Property + ": " + e.Reason }

func sslErr(prop, reason string, args ...any) error {
	return &Error{Property: prop, Reason: fmt.Sprintf(reason, args...)}
}

// TLS reads the files and builds the TLS configuration the settings
// describe.
// Verification is always on; an empty ssl.endpoint.identification.algorithm
// skips only the host name check, as in Java.
func (s *Config) TLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: s.MinVersion, MaxVersion: s.MaxVersion}
	roots, err := s.trustRoots()
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = roots
	cert, err := s.clientCert()
	if err != nil {
		return nil, err
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	if !s.VerifyHostname {
		// Go verifies chain and host together; to keep the chain check
		// alone, skip the built-in one and redo it without a host name.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: broker sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
			}
			return nil
		}
	}
	return cfg, nil
}

// trustRoots returns the CA pool, or nil for the system roots.
func (s *Config) trustRoots() (*x509.CertPool, error) {
	if s.TruststoreCerts != "" {
		if s.TruststoreType != "PEM" {
			return nil, sslErr("ssl.truststore.certificates", "needs ssl.truststore.type=PEM")
		}
		if s.TruststoreLocation != "" {
			return nil, sslErr("ssl.truststore.certificates", "set either it or ssl.truststore.location, not both")
		}
		return pemPool("ssl.truststore.certificates", []byte(s.TruststoreCerts))
	}
	if s.TruststoreLocation == "" {
		return nil, nil
	}
	const prop = "ssl.truststore.location"
	data, err := os.ReadFile(s.TruststoreLocation)
	if err != nil {
		return nil, sslErr(prop, "%v", err)
	}
	if s.TruststoreType == "PEM" {
		return pemPool(prop, data)
	}
	if err := checkNotJKS(prop, s.TruststoreLocation, data); err != nil {
		return nil, err
	}
	certs, err := decodeTrustStore(data, s.TruststorePassword)
	if err != nil {
		return nil, sslErr(prop, "reading PKCS12 trust store %s: %v (is ssl.truststore.password right?)", s.TruststoreLocation, err)
	}
	if len(certs) == 0 {
		return nil, sslErr(prop, "no certificates in %s", s.TruststoreLocation)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func pemPool(prop string, data []byte) (*x509.CertPool, error) {
	certs, err := pemCerts(prop, data)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func pemCerts(prop string, data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, sslErr(prop, "bad certificate: %v", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, sslErr(prop, "no PEM CERTIFICATE block found")
	}
	return certs, nil
}

// checkNotJKS rejects Java's own store formats, which Go cannot read.
func checkNotJKS(prop, path string, data []byte) error {
	if bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfe, 0xed}) || bytes.HasPrefix(data, []byte{0xce, 0xce, 0xce, 0xce}) {
		return sslErr(prop, "%s is a JKS/JCEKS store, which is not supported: convert it with "+
			"keytool -importkeystore -srckeystore %s -destkeystore store.p12 -deststoretype PKCS12, "+
			"or use PEM (ssl.*.type=PEM)", path, path)
	}
	return nil
}

// clientCert returns the client certificate for mutual TLS, or nil.
func (s *Config) clientCert() (*tls.Certificate, error) {
	if s.KeystoreChain != "" || s.KeystoreKey != "" {
		if s.KeystoreType != "PEM" {
			return nil, sslErr("ssl.keystore.certificate.chain", "needs ssl.keystore.type=PEM")
		}
		if s.KeystoreLocation != "" {
			return nil, sslErr("ssl.keystore.location", "set either it or ssl.keystore.certificate.chain and ssl.keystore.key, not both")
		}
		if s.KeystoreChain == "" || s.KeystoreKey == "" {
			return nil, sslErr("ssl.keystore.key", "ssl.keystore.certificate.chain and ssl.keystore.key go together")
		}
		return pemKeyPair("ssl.keystore.certificate.chain", "ssl.keystore.key", []byte(s.KeystoreChain), []byte(s.KeystoreKey), s.KeyPassword)
	}
	if s.KeystoreLocation == "" {
		return nil, nil
	}
	const prop = "ssl.keystore.location"
	data, err := os.ReadFile(s.KeystoreLocation)
	if err != nil {
		return nil, sslErr(prop, "%v", err)
	}
	if s.KeystoreType == "PEM" {
		if s.KeystorePassword != "" {
			return nil, sslErr("ssl.keystore.password", "not used with ssl.keystore.type=PEM: an encrypted key's password is ssl.key.password")
		}
		return pemKeyPair(prop, prop, data, data, s.KeyPassword)
	}
	if err := checkNotJKS(prop, s.KeystoreLocation, data); err != nil {
		return nil, err
	}
	key, chain, err := decodeKeyStore(data, s.KeystorePassword)
	if err != nil {
		return nil, sslErr(prop, "reading PKCS12 key store %s: %v (is ssl.keystore.password right?)", s.KeystoreLocation, err)
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return cert, nil
}

// pemKeyPair reads a certificate chain and a PKCS#8 key (encrypted with
// password if it says so) from PEM text.
func pemKeyPair(chainProp, keyProp string, chainPEM, keyPEM []byte, password string) (*tls.Certificate, error) {
	certs, err := pemCerts(chainProp, chainPEM)
	if err != nil {
		return nil, err
	}
	var keyDER []byte
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY":
			keyDER = b.Bytes
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, sslErr("ssl.key.password", "required: the private key in %s is encrypted", keyProp)
			}
			if keyDER, err = decryptPKCS8(b.Bytes, password); err != nil {
				return nil, sslErr("ssl.key.password", "cannot decrypt the private key in %s: %v", keyProp, err)
			}
		case "RSA PRIVATE KEY", "EC PRIVATE KEY":
			return nil, sslErr(keyProp, "%s is not PKCS#8; as Java, only PKCS#8 keys are read "+
				"(convert with openssl pkcs8 -topk8)", b.Type)
		}
		if keyDER != nil {
			break
		}
	}
	if keyDER == nil {
		return nil, sslErr(keyProp, "no PEM PRIVATE KEY block found")
	}
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, sslErr(keyProp, "bad PKCS#8 private key: %v", err)
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: certs[0]}
	for _, c := range certs {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	// Check the key belongs to the certificate now, not at the first
	// handshake.
	if _, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0].Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})); err != nil {
		return nil, sslErr(keyProp, "%v", err)
	}
	return cert, nil
}
