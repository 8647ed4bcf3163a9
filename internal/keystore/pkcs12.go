package keystore

import (
	"bytes"
	"crypto"
	"crypto/des"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
	"unicode/utf16"
)

// A PKCS12 store (RFC 7292) as keytool and openssl write it: an
// authenticated safe (password integrity: an HMAC keyed from the password)
// holding safe contents, plain or password-encrypted, whose bags are
// private keys (plain or shrouded) and X.509 certificates. Read here are
// the encryptions keytool and openssl have used: PBES2 (PBKDF2 with
// AES-CBC or 3DES, what both write today) and the PKCS12 PBE schemes with
// SHA-1 (3DES and RC2, what keytool wrote before Java 12 and openssl
// writes with -legacy); MACs with SHA-1 and SHA-2. Public-key integrity
// (signed stores), PBMAC1 and RC4 are refused by name.

var (
	oidData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidEncryptedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 6}
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}

	oidKeyBag          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 1}
	oidShroudedKeyBag  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidCertBag         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 3}
	oidSafeContentsBag = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 6}
	oidX509Cert        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 22, 1}
	oidLocalKeyID      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 21}
	// oidJavaTrusted marks a certificate entry keytool added as trusted
	// (Oracle's trustedKeyUsage attribute).
	oidJavaTrusted = asn1.ObjectIdentifier{2, 16, 840, 1, 113894, 746875, 1, 1}

	oidSHA1   = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidSHA224 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 4}
	oidSHA256 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSHA384 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
	oidSHA512 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 3}
	oidPBMAC1 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 14}

	// PKCS12 PBE with SHA-1 (RFC 7292 appendix C): the last arc.
	oidPKCS12PBE = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1}
)

// errWrongPassword is what a MAC mismatch or a garbled decryption means.
var errWrongPassword = errors.New("wrong password")

// maxIterations bounds a store's iteration counts: a hostile file could
// otherwise ask for hours of hashing.
const maxIterations = 10_000_000

// An explicitly tagged RawValue holds the tag's element: its Bytes are
// the tagged value's encoding.
type p12ContentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"tag:0,explicit,optional"`
}

type p12DigestInfo struct {
	Algorithm pkcs8AlgID
	Digest    []byte
}

type p12MacData struct {
	Mac        p12DigestInfo
	MacSalt    []byte
	Iterations int `asn1:"optional,default:1"`
}

type p12PFX struct {
	Version  int
	AuthSafe p12ContentInfo
	MacData  p12MacData `asn1:"optional"`
}

type p12EncryptedContentInfo struct {
	ContentType      asn1.ObjectIdentifier
	Algorithm        pkcs8AlgID
	EncryptedContent asn1.RawValue `asn1:"tag:0,optional"`
}

type p12EncryptedData struct {
	Version int
	Info    p12EncryptedContentInfo
}

type p12Attribute struct {
	ID     asn1.ObjectIdentifier
	Values asn1.RawValue `asn1:"set"`
}

type p12SafeBag struct {
	ID         asn1.ObjectIdentifier
	Value      asn1.RawValue  `asn1:"tag:0,explicit"`
	Attributes []p12Attribute `asn1:"set,optional"`
}

type p12CertBag struct {
	ID    asn1.ObjectIdentifier
	Value []byte `asn1:"tag:0,explicit"`
}

type p12PBEParams struct {
	Salt       []byte
	Iterations int
}

// p12Key is a private key bag: its PKCS#8 DER and the localKeyId that
// pairs it with its certificate.
type p12Key struct {
	der   []byte
	keyID []byte
}

type p12Cert struct {
	cert    *x509.Certificate
	keyID   []byte
	trusted bool
}

type p12Store struct {
	keys  []p12Key
	certs []p12Cert
}

// decodePKCS12 opens a PKCS12 store with password, checking its MAC when
// it has one, and returns its keys and certificates.
func decodePKCS12(data []byte, password string) (*p12Store, error) {
	var pfx p12PFX
	if rest, err := asn1.Unmarshal(data, &pfx); err != nil || len(rest) > 0 {
		return nil, errors.New("not a PKCS12 file")
	}
	if pfx.Version != 3 {
		return nil, fmt.Errorf("PKCS12 version %d is not supported (only 3)", pfx.Version)
	}
	if pfx.AuthSafe.ContentType.Equal(oidSignedData) {
		return nil, errors.New("a store signed with a public key (not a password) is not supported")
	}
	authSafe, err := p12Data(pfx.AuthSafe)
	if err != nil {
		return nil, err
	}
	if len(pfx.MacData.Mac.Algorithm.Algorithm) > 0 {
		if err := p12CheckMAC(&pfx.MacData, authSafe, password); err != nil {
			return nil, err
		}
	}
	var contents []p12ContentInfo
	if rest, err := asn1.Unmarshal(authSafe, &contents); err != nil || len(rest) > 0 {
		return nil, errors.New("bad authenticated safe")
	}
	st := &p12Store{}
	for _, ci := range contents {
		var safe []byte
		switch {
		case ci.ContentType.Equal(oidData):
			if safe, err = p12Data(ci); err != nil {
				return nil, err
			}
		case ci.ContentType.Equal(oidEncryptedData):
			var ed p12EncryptedData
			if _, err := asn1.Unmarshal(ci.Content.Bytes, &ed); err != nil {
				return nil, errors.New("bad encrypted data")
			}
			if ed.Info.EncryptedContent.IsCompound {
				return nil, errors.New("constructed (BER) encrypted content is not supported")
			}
			if safe, err = pbeOpen(ed.Info.Algorithm, password, ed.Info.EncryptedContent.Bytes); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("safe content type %v is not supported", ci.ContentType)
		}
		if err := st.addBags(safe, password, 0); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// p12Data returns the octets of a data ContentInfo.
func p12Data(ci p12ContentInfo) ([]byte, error) {
	if !ci.ContentType.Equal(oidData) {
		return nil, fmt.Errorf("content type %v is not supported", ci.ContentType)
	}
	var octets []byte
	if rest, err := asn1.Unmarshal(ci.Content.Bytes, &octets); err != nil || len(rest) > 0 {
		return nil, errors.New("bad data content")
	}
	return octets, nil
}

// addBags reads a SafeContents; a safe contents bag nests another, a
// few levels at most.
func (st *p12Store) addBags(safe []byte, password string, depth int) error {
	if depth > 4 {
		return errors.New("safe contents nested too deep")
	}
	var bags []p12SafeBag
	if rest, err := asn1.Unmarshal(safe, &bags); err != nil || len(rest) > 0 {
		return errors.New("bad safe contents")
	}
	for _, bag := range bags {
		var keyID []byte
		trusted := false
		for _, a := range bag.Attributes {
			switch {
			case a.ID.Equal(oidLocalKeyID):
				if _, err := asn1.Unmarshal(a.Values.Bytes, &keyID); err != nil {
					return errors.New("bad localKeyId attribute")
				}
			case a.ID.Equal(oidJavaTrusted):
				trusted = true
			}
		}
		switch {
		case bag.ID.Equal(oidKeyBag):
			st.keys = append(st.keys, p12Key{der: bag.Value.Bytes, keyID: keyID})
		case bag.ID.Equal(oidShroudedKeyBag):
			var info pkcs8Encrypted
			if rest, err := asn1.Unmarshal(bag.Value.Bytes, &info); err != nil || len(rest) > 0 {
				return errors.New("bad shrouded key bag")
			}
			der, err := pbeOpen(info.Algo, password, info.Data)
			if err != nil {
				return err
			}
			st.keys = append(st.keys, p12Key{der: der, keyID: keyID})
		case bag.ID.Equal(oidCertBag):
			var cb p12CertBag
			if _, err := asn1.Unmarshal(bag.Value.Bytes, &cb); err != nil {
				return errors.New("bad certificate bag")
			}
			if !cb.ID.Equal(oidX509Cert) {
				continue // an SDSI certificate: nothing TLS can use
			}
			c, err := x509.ParseCertificate(cb.Value)
			if err != nil {
				return fmt.Errorf("bad certificate: %v", err)
			}
			st.certs = append(st.certs, p12Cert{cert: c, keyID: keyID, trusted: trusted})
		case bag.ID.Equal(oidSafeContentsBag):
			if err := st.addBags(bag.Value.Bytes, password, depth+1); err != nil {
				return err
			}
		}
		// CRL and secret bags hold nothing a TLS client uses.
	}
	return nil
}

// p12CheckMAC verifies the store's HMAC over authSafe, keyed by the
// PKCS12 key derivation (ID 3) of the password.
func p12CheckMAC(m *p12MacData, authSafe []byte, password string) error {
	alg := m.Mac.Algorithm.Algorithm
	if alg.Equal(oidPBMAC1) {
		return errors.New("PBMAC1 integrity is not supported (openssl pkcs12 -pbmac1_pbkdf2 writes it): " +
			"export the store with an HMAC MAC, the default")
	}
	h, v, err := p12Hash(alg)
	if err != nil {
		return err
	}
	if m.Iterations <= 0 || m.Iterations > maxIterations {
		return fmt.Errorf("MAC iteration count %d out of range", m.Iterations)
	}
	candidates := [][]byte{bmpPassword(password)}
	if password == "" {
		// An empty password is two zero bytes to some writers and no
		// bytes at all to others.
		candidates = append(candidates, nil)
	}
	for _, pw := range candidates {
		key := p12KDF(h, v, pw, m.MacSalt, 3, m.Iterations, h().Size())
		mac := hmac.New(h, key)
		mac.Write(authSafe)
		if hmac.Equal(mac.Sum(nil), m.Mac.Digest) {
			return nil
		}
	}
	return errWrongPassword
}

// p12Hash returns a MAC's hash and its block size in bytes (the v of the
// PKCS12 key derivation).
func p12Hash(alg asn1.ObjectIdentifier) (func() hash.Hash, int, error) {
	switch {
	case alg.Equal(oidSHA1):
		return sha1.New, 64, nil
	case alg.Equal(oidSHA224):
		return sha256.New224, 64, nil
	case alg.Equal(oidSHA256):
		return sha256.New, 64, nil
	case alg.Equal(oidSHA384):
		return sha512.New384, 128, nil
	case alg.Equal(oidSHA512):
		return sha512.New, 128, nil
	}
	return nil, 0, fmt.Errorf("MAC digest %v is not supported", alg)
}

// bmpPassword is a password as the PKCS12 key derivation takes it:
// UTF-16 big-endian with a terminating zero character.
func bmpPassword(s string) []byte {
	units := utf16.Encode([]rune(s))
	out := make([]byte, 0, 2*len(units)+2)
	for _, u := range units {
		out = append(out, byte(u>>8), byte(u))
	}
	return append(out, 0, 0)
}

// p12KDF derives n bytes for purpose id (1 key, 2 IV, 3 MAC key) from
// password and salt, RFC 7292 appendix B.2.
func p12KDF(h func() hash.Hash, v int, password, salt []byte, id byte, iterations, n int) []byte {
	fill := func(src []byte) []byte {
		if len(src) == 0 {
			return nil
		}
		out := make([]byte, v*((len(src)+v-1)/v))
		for i := range out {
			out[i] = src[i%len(src)]
		}
		return out
	}
	d := bytes.Repeat([]byte{id}, v)
	in := append(fill(salt), fill(password)...)
	var out []byte
	for len(out) < n {
		hh := h()
		hh.Write(d)
		hh.Write(in)
		a := hh.Sum(nil)
		for range iterations - 1 {
			hh.Reset()
			hh.Write(a)
			a = hh.Sum(a[:0])
		}
		out = append(out, a...)
		if len(out) >= n {
			break
		}
		// Each v-byte block of in becomes (block + B + 1) mod 2^(8v),
		// where B is a repeated to v bytes.
		b := fill(a)[:v]
		for j := 0; j < len(in); j += v {
			carry := 1
			for k := v - 1; k >= 0; k-- {
				sum := int(in[j+k]) + int(b[k]) + carry
				in[j+k] = byte(sum)
				carry = sum >> 8
			}
		}
	}
	return out[:n]
}

// pbeOpen decrypts data encrypted under alg with password: PBES2, or a
// PKCS12 PBE scheme.
func pbeOpen(alg pkcs8AlgID, password string, data []byte) ([]byte, error) {
	if alg.Algorithm.Equal(oidPBES2) {
		return pbes2Open(alg.Parameters.FullBytes, []byte(password), data)
	}
	a := alg.Algorithm
	if len(a) != len(oidPKCS12PBE)+1 || !a[:len(a)-1].Equal(oidPKCS12PBE) {
		return nil, fmt.Errorf("encryption %v is not supported", a)
	}
	var p p12PBEParams
	if _, err := asn1.Unmarshal(alg.Parameters.FullBytes, &p); err != nil {
		return nil, errors.New("bad PKCS12 PBE parameters")
	}
	if p.Iterations <= 0 || p.Iterations > maxIterations {
		return nil, fmt.Errorf("PBE iteration count %d out of range", p.Iterations)
	}
	pw := bmpPassword(password)
	derive := func(keyLen int) (key, iv []byte) {
		return p12KDF(sha1.New, 64, pw, p.Salt, 1, p.Iterations, keyLen),
			p12KDF(sha1.New, 64, pw, p.Salt, 2, p.Iterations, 8)
	}
	var b blockDecrypter
	var iv []byte
	var err error
	switch a[len(a)-1] {
	case 3: // pbeWithSHAAnd3-KeyTripleDES-CBC
		var key []byte
		key, iv = derive(24)
		b, err = des.NewTripleDESCipher(key)
	case 4: // pbeWithSHAAnd2-KeyTripleDES-CBC: K1 K2 K1
		var key []byte
		key, iv = derive(16)
		b, err = des.NewTripleDESCipher(append(key, key[:8]...))
	case 5: // pbeWithSHAAnd128BitRC2-CBC
		var key []byte
		key, iv = derive(16)
		b, err = newRC2(key, 128)
	case 6: // pbeWithSHAAnd40BitRC2-CBC
		var key []byte
		key, iv = derive(5)
		b, err = newRC2(key, 40)
	default: // 1 and 2 are RC4, a stream cipher no tool has written for years
		return nil, fmt.Errorf("encryption %v is not supported", a)
	}
	if err != nil {
		return nil, err
	}
	return cbcOpen(b, iv, data)
}

// blockDecrypter is the half of a block cipher CBC decryption needs.
type blockDecrypter interface {
	BlockSize() int
	Decrypt(dst, src []byte)
}

// cbcOpen decrypts data in CBC mode and removes its PKCS#7 padding. A
// wrong password shows as bad padding (or, rarely, good padding on
// garbage that the caller's parse then refuses).
func cbcOpen(b blockDecrypter, iv, data []byte) ([]byte, error) {
	bs := b.BlockSize()
	if len(iv) != bs || len(data) == 0 || len(data)%bs != 0 {
		return nil, errors.New("bad ciphertext length")
	}
	out := make([]byte, len(data))
	prev := iv
	for i := 0; i < len(data); i += bs {
		b.Decrypt(out[i:i+bs], data[i:i+bs])
		for k := range bs {
			out[i+k] ^= prev[k]
		}
		prev = data[i : i+bs]
	}
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs || !hmac.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errWrongPassword
	}
	return out[:len(out)-pad], nil
}

// decodeTrustStore returns a PKCS12 trust store's certificates: the
// entries keytool marked trusted, or, in a store without such marks
// (openssl writes none), every certificate not paired with a key.
func decodeTrustStore(data []byte, password string) ([]*x509.Certificate, error) {
	st, err := decodePKCS12(data, password)
	if err != nil {
		return nil, err
	}
	var marked, unpaired []*x509.Certificate
	for _, c := range st.certs {
		if c.trusted {
			marked = append(marked, c.cert)
		}
		if !st.paired(c) {
			unpaired = append(unpaired, c.cert)
		}
	}
	if len(marked) > 0 {
		return marked, nil
	}
	return unpaired, nil
}

// paired reports whether c is a key's certificate.
func (st *p12Store) paired(c p12Cert) bool {
	for _, k := range st.keys {
		if len(c.keyID) > 0 && bytes.Equal(c.keyID, k.keyID) {
			return true
		}
	}
	return false
}

// decodeKeyStore returns a PKCS12 key store's one private key and its
// certificate chain, leaf first, then each issuer found in the store, then
// the store's other certificates.
func decodeKeyStore(data []byte, password string) (crypto.PrivateKey, []*x509.Certificate, error) {
	st, err := decodePKCS12(data, password)
	if err != nil {
		return nil, nil, err
	}
	if len(st.keys) != 1 {
		return nil, nil, fmt.Errorf("the store holds %d private keys; longhaul needs exactly one "+
			"(keep one key entry: keytool -delete -alias ...)", len(st.keys))
	}
	k := st.keys[0]
	key, err := x509.ParsePKCS8PrivateKey(k.der)
	if err != nil {
		return nil, nil, errWrongPassword // a decryption with good-looking padding
	}
	pub := key.(interface{ Public() crypto.PublicKey }).Public()
	leaf := -1
	for i, c := range st.certs {
		if len(k.keyID) > 0 && bytes.Equal(c.keyID, k.keyID) {
			leaf = i
			break
		}
	}
	if leaf < 0 {
		for i, c := range st.certs {
			if eq, ok := c.cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(pub) {
				leaf = i
				break
			}
		}
	}
	if leaf < 0 {
		return nil, nil, errors.New("no certificate in the store belongs to its private key")
	}
	if eq, ok := st.certs[leaf].cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(pub) {
		return nil, nil, errors.New("the private key does not match its certificate")
	}
	used := make([]bool, len(st.certs))
	used[leaf] = true
	chain := []*x509.Certificate{st.certs[leaf].cert}
	for {
		last := chain[len(chain)-1]
		next := -1
		for i, c := range st.certs {
			if !used[i] && bytes.Equal(c.cert.RawSubject, last.RawIssuer) {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		used[next] = true
		chain = append(chain, st.certs[next].cert)
	}
	for i, c := range st.certs {
		if !used[i] {
			chain = append(chain, c.cert)
		}
	}
	return key, chain, nil
}
