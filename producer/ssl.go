package producer

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"

	"software.sslmate.com/src/go-pkcs12"
)

// Java's ssl.* properties: trust and key stores as PEM (files or inline
// text) or PKCS12 files, hostname verification and the TLS versions. They
// build the tls.Config when security.protocol is SSL or SASL_SSL and the
// TLS option is not given. JKS stores are rejected with a message saying
// how to convert them.

// sslConfig holds the ssl.* properties as given; tlsConfig reads the files
// and builds a tls.Config once, in validate, so a bad file fails New.
type sslConfig struct {
	truststoreType, truststoreLocation, truststorePassword, truststoreCerts string
	keystoreType, keystoreLocation, keystorePassword                        string
	keystoreChain, keystoreKey, keyPassword                                 string
	verifyHostname                                                          bool
	minVersion, maxVersion                                                  uint16
}

func strSetter(store func(*sslConfig, string)) func(*config, string) error {
	return func(c *config, v string) error { store(&c.ssl, v); return nil }
}

func storeTypeSetter(store func(*sslConfig, string)) func(*config, string) error {
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
		storeTypeSetter(func(s *sslConfig, v string) { s.truststoreType = v })},
	{"ssl.truststore.location", "", "file of CA certificates that verify brokers; empty = the system roots",
		strSetter(func(s *sslConfig, v string) { s.truststoreLocation = v })},
	{"ssl.truststore.password", "", "password of a PKCS12 trust store",
		strSetter(func(s *sslConfig, v string) { s.truststorePassword = v })},
	{"ssl.truststore.certificates", "", "CA certificates as PEM text (ssl.truststore.type=PEM), instead of a file",
		strSetter(func(s *sslConfig, v string) { s.truststoreCerts = v })},
	{"ssl.keystore.type", "JKS", "PEM or PKCS12; JKS (the Java default) reads PKCS12 files, as Java does, and rejects real JKS files",
		storeTypeSetter(func(s *sslConfig, v string) { s.keystoreType = v })},
	{"ssl.keystore.location", "", "file with the client's certificate chain and private key, for mutual TLS",
		strSetter(func(s *sslConfig, v string) { s.keystoreLocation = v })},
	{"ssl.keystore.password", "", "password of a PKCS12 key store (not used with PEM)",
		strSetter(func(s *sslConfig, v string) { s.keystorePassword = v })},
	{"ssl.keystore.certificate.chain", "", "client certificate chain as PEM text (ssl.keystore.type=PEM), with ssl.keystore.key",
		strSetter(func(s *sslConfig, v string) { s.keystoreChain = v })},
	{"ssl.keystore.key", "", "client private key as PKCS#8 PEM text (ssl.keystore.type=PEM), with ssl.keystore.certificate.chain",
		strSetter(func(s *sslConfig, v string) { s.keystoreKey = v })},
	{"ssl.key.password", "", "password of an encrypted PKCS#8 PEM private key",
		strSetter(func(s *sslConfig, v string) { s.keyPassword = v })},
	{"ssl.endpoint.identification.algorithm", "https", "https: check the broker's certificate matches its host name; empty: check only that a trusted CA signed it", func(c *config, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "https":
			c.ssl.verifyHostname = true
		case "":
			c.ssl.verifyHostname = false
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
		c.ssl.minVersion, c.ssl.maxVersion = lo, hi
		return nil
	}},
}

func sslErr(prop, reason string, args ...any) error {
	return &ConfigError{Property: prop, Reason: fmt.Sprintf(reason, args...)}
}

// tlsConfig builds the TLS configuration the ssl.* properties describe.
// Verification is always on; an empty ssl.endpoint.identification.algorithm
// skips only the host name check, as in Java.
func (s *sslConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: s.minVersion, MaxVersion: s.maxVersion}
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
	if !s.verifyHostname {
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
func (s *sslConfig) trustRoots() (*x509.CertPool, error) {
	if s.truststoreCerts != "" {
		if s.truststoreType != "PEM" {
			return nil, sslErr("ssl.truststore.certificates", "needs ssl.truststore.type=PEM")
		}
		if s.truststoreLocation != "" {
			return nil, sslErr("ssl.truststore.certificates", "set either it or ssl.truststore.location, not both")
		}
		return pemPool("ssl.truststore.certificates", []byte(s.truststoreCerts))
	}
	if s.truststoreLocation == "" {
		return nil, nil
	}
	const prop = "ssl.truststore.location"
	data, err := os.ReadFile(s.truststoreLocation)
	if err != nil {
		return nil, sslErr(prop, "%v", err)
	}
	if s.truststoreType == "PEM" {
		return pemPool(prop, data)
	}
	if err := checkNotJKS(prop, s.truststoreLocation, data); err != nil {
		return nil, err
	}
	certs, err := pkcs12.DecodeTrustStore(data, s.truststorePassword)
	if err != nil {
		return nil, sslErr(prop, "reading PKCS12 trust store %s: %v (is ssl.truststore.password right?)", s.truststoreLocation, err)
	}
	if len(certs) == 0 {
		return nil, sslErr(prop, "no certificates in %s", s.truststoreLocation)
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
func (s *sslConfig) clientCert() (*tls.Certificate, error) {
	if s.keystoreChain != "" || s.keystoreKey != "" {
		if s.keystoreType != "PEM" {
			return nil, sslErr("ssl.keystore.certificate.chain", "needs ssl.keystore.type=PEM")
		}
		if s.keystoreLocation != "" {
			return nil, sslErr("ssl.keystore.location", "set either it or ssl.keystore.certificate.chain and ssl.keystore.key, not both")
		}
		if s.keystoreChain == "" || s.keystoreKey == "" {
			return nil, sslErr("ssl.keystore.key", "ssl.keystore.certificate.chain and ssl.keystore.key go together")
		}
		return pemKeyPair("ssl.keystore.certificate.chain", "ssl.keystore.key", []byte(s.keystoreChain), []byte(s.keystoreKey), s.keyPassword)
	}
	if s.keystoreLocation == "" {
		return nil, nil
	}
	const prop = "ssl.keystore.location"
	data, err := os.ReadFile(s.keystoreLocation)
	if err != nil {
		return nil, sslErr(prop, "%v", err)
	}
	if s.keystoreType == "PEM" {
		if s.keystorePassword != "" {
			return nil, sslErr("ssl.keystore.password", "not used with ssl.keystore.type=PEM: an encrypted key's password is ssl.key.password")
		}
		return pemKeyPair(prop, prop, data, data, s.keyPassword)
	}
	if err := checkNotJKS(prop, s.keystoreLocation, data); err != nil {
		return nil, err
	}
	key, leaf, cas, err := pkcs12.DecodeChain(data, s.keystorePassword)
	if err != nil {
		return nil, sslErr(prop, "reading PKCS12 key store %s: %v (is ssl.keystore.password right?)", s.keystoreLocation, err)
	}
	cert := &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, c := range cas {
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

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type pkcs8AlgID struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type pkcs8Encrypted struct {
	Algo pkcs8AlgID
	Data []byte
}

type pkcs8PBES2 struct {
	KDF pkcs8AlgID
	Enc pkcs8AlgID
}

type pkcs8PBKDF2 struct {
	Salt       []byte
	Iterations int
	KeyLength  int        `asn1:"optional"`
	PRF        pkcs8AlgID `asn1:"optional"`
}

// decryptPKCS8 opens an EncryptedPrivateKeyInfo protected with PBES2
// (PBKDF2 with HMAC-SHA1/224/256/384/512, AES-CBC or 3DES-CBC): what
// OpenSSL, keytool and Java's PEM key stores use. Older PBES1 schemes are
// rejected.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info pkcs8Encrypted
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("not an EncryptedPrivateKeyInfo")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption %v is not supported; only PBES2 (openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algo.Algorithm)
	}
	var params pkcs8PBES2
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("bad PBES2 parameters")
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %v is not supported; only PBKDF2", params.KDF.Algorithm)
	}
	var kdf pkcs8PBKDF2
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("bad PBKDF2 parameters")
	}
	var prf func() hash.Hash
	switch alg := kdf.PRF.Algorithm; {
	case len(alg) == 0 || alg.Equal(oidHMACSHA1):
		prf = sha1.New
	case alg.Equal(oidHMACSHA224):
		prf = sha256.New224
	case alg.Equal(oidHMACSHA256):
		prf = sha256.New
	case alg.Equal(oidHMACSHA384):
		prf = sha512.New384
	case alg.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("PBKDF2 PRF %v is not supported", alg)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch alg := params.Enc.Algorithm; {
	case alg.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case alg.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case alg.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case alg.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("cipher %v is not supported", alg)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Enc.Parameters.FullBytes, &iv); err != nil {
		return nil, errors.New("bad cipher IV")
	}
	if kdf.Iterations <= 0 || kdf.Iterations > 10_000_000 {
		return nil, fmt.Errorf("PBKDF2 iteration count %d out of range", kdf.Iterations)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(iv) != bs || len(info.Data) == 0 || len(info.Data)%bs != 0 {
		return nil, errors.New("bad ciphertext length")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// A wrong password leaves garbage padding (or, rarely, valid-looking
	// padding and garbage DER, caught by the PKCS#8 parse after).
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs || !hmac.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("wrong password")
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errors.New("wrong password")
	}
	return out, nil
}
