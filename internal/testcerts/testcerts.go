// Package testcerts makes X.509 certificates for tests: a CA, server
// certificates for given host names and IPs (valid, expired, or for other
// hosts), client certificates for mutual TLS, and their PEM encodings,
// including the encrypted PKCS#8 keys Java writes ("ENCRYPTED PRIVATE
// KEY", PBES2 with PBKDF2-HMAC-SHA256 and AES-256-CBC). Keys are ECDSA
// P-256, which both Go and Java accept, and are fast to generate.
package testcerts

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Leaf is a certificate issued by a CA, with its private key.
type Leaf struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	CA   *CA
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LeafOptions says what a certificate is for.
type LeafOptions struct {
	// CommonName is the subject CN; for a client it is the principal the
	// broker sees (User:CN=...).
	CommonName string
	// Hosts are DNS names and IP addresses for a server certificate.
	Hosts []string
	// Client makes a client certificate (extended key usage clientAuth)
	// instead of a server one.
	Client bool
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

// Issue signs a new certificate.
func (ca *CA) Issue(o LeafOptions) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: cert, Key: key, CA: ca}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

// CertPEM returns the CA certificate as PEM.
func (ca *CA) CertPEM() []byte { return CertPEM(ca.Cert) }

// Pool returns a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// CertPEM encodes certificates as PEM, in order.
func CertPEM(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// ChainPEM returns the leaf certificate followed by its CA.
func (l *Leaf) ChainPEM() []byte { return CertPEM(l.Cert, l.CA.Cert) }

// KeyPEM returns the private key as unencrypted PKCS#8 ("PRIVATE KEY").
func (l *Leaf) KeyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// EncryptedKeyPEM returns the private key as encrypted PKCS#8 ("ENCRYPTED
// PRIVATE KEY"): PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC, as OpenSSL 3 and
// Java write it.
func (l *Leaf) EncryptedKeyPEM(password string) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		panic(err)
	}
	enc, err := EncryptPKCS8(der, password)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: enc})
}

// TLSCertificate returns the leaf and its CA as a tls.Certificate.
func (l *Leaf) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{l.Cert.Raw, l.CA.Cert.Raw}, PrivateKey: l.Key, Leaf: l.Cert}
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type algID struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	PRF        algID `asn1:"optional"`
}

type pbes2Params struct {
	KDF algID
	Enc algID
}

type encryptedPKCS8 struct {
	Algo algID
	Data []byte
}

// EncryptPKCS8 wraps a PKCS#8 DER key in an EncryptedPrivateKeyInfo.
func EncryptPKCS8(der []byte, password string) ([]byte, error) {
	salt := make([]byte, 16)
	iv := make([]byte, aes.BlockSize)
	rand.Read(salt)
	rand.Read(iv)
	const iter = 2048
	key, err := pbkdf2.Key(sha256.New, password, salt, iter, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	pad := aes.BlockSize - len(der)%aes.BlockSize
	plain := append(append([]byte(nil), der...), make([]byte, pad)...)
	for i := len(der); i < len(plain); i++ {
		plain[i] = byte(pad)
	}
	data := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(data, plain)

	prf, err := asn1.Marshal(algID{Algorithm: oidHMACSHA256, Parameters: asn1.NullRawValue})
	if err != nil {
		return nil, err
	}
	var prfID algID
	if _, err := asn1.Unmarshal(prf, &prfID); err != nil {
		return nil, err
	}
	kdf, err := asn1.Marshal(pbkdf2Params{Salt: salt, Iterations: iter, PRF: prfID})
	if err != nil {
		return nil, err
	}
	ivDER, err := asn1.Marshal(iv)
	if err != nil {
		return nil, err
	}
	params, err := asn1.Marshal(pbes2Params{
		KDF: algID{Algorithm: oidPBKDF2, Parameters: asn1.RawValue{FullBytes: kdf}},
		Enc: algID{Algorithm: oidAES256CBC, Parameters: asn1.RawValue{FullBytes: ivDER}},
	})
	if err != nil {
		return nil, err
	}
	out, err := asn1.Marshal(encryptedPKCS8{
		Algo: algID{Algorithm: oidPBES2, Parameters: asn1.RawValue{FullBytes: params}},
		Data: data,
	})
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	return out, nil
}

var (
	oidData            = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidShroudedKeyBag  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidCertBag         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 3}
	oidX509Certificate = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 22, 1}
)

// Content and Value are [0] EXPLICIT: explicit0 wraps them, since a
// RawValue is marshalled as it is, whatever its field's tag says.
type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue
}

type safeBag struct {
	ID    asn1.ObjectIdentifier
	Value asn1.RawValue
}

func explicit0(inner []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner}
}

type certBag struct {
	ID    asn1.ObjectIdentifier
	Value []byte `asn1:"tag:0,explicit"`
}

type pfx struct {
	Version  int
	AuthSafe contentInfo
}

// PKCS12 encodes a PKCS12 key store holding key, encrypted as
// EncryptPKCS8 does, and its certificate chain. The store has no MAC (as
// openssl pkcs12 -nomac writes), so the key's encryption is what the
// password guards; the keystore package's own tests read the files
// keytool and openssl write.
func PKCS12(key crypto.Signer, chain []*x509.Certificate, password string) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	enc, err := EncryptPKCS8(der, password)
	if err != nil {
		return nil, err
	}
	bags := []safeBag{{ID: oidShroudedKeyBag, Value: explicit0(enc)}}
	return pkcs12Of(bags, chain)
}

// PKCS12TrustStore encodes a PKCS12 trust store holding certs, without a
// MAC or encryption (see PKCS12).
func PKCS12TrustStore(certs []*x509.Certificate) ([]byte, error) {
	return pkcs12Of(nil, certs)
}

func pkcs12Of(bags []safeBag, certs []*x509.Certificate) ([]byte, error) {
	for _, c := range certs {
		cb, err := asn1.Marshal(certBag{ID: oidX509Certificate, Value: c.Raw})
		if err != nil {
			return nil, fmt.Errorf("testcerts: %w", err)
		}
		bags = append(bags, safeBag{ID: oidCertBag, Value: explicit0(cb)})
	}
	safe, err := asn1.Marshal(bags)
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	data := func(b []byte) (contentInfo, error) {
		octets, err := asn1.Marshal(b)
		return contentInfo{ContentType: oidData, Content: explicit0(octets)}, err
	}
	inner, err := data(safe)
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	authSafe, err := asn1.Marshal([]contentInfo{inner})
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	outer, err := data(authSafe)
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	out, err := asn1.Marshal(pfx{Version: 3, AuthSafe: outer})
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	return out, nil
}
