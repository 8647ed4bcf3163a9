package keystore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

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
	out, err := pbes2Open(info.Algo.Parameters.FullBytes, []byte(password), info.Data)
	if err != nil {
		return nil, err
	}
	// Good-looking padding on garbage is caught here.
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errWrongPassword
	}
	return out, nil
}

// pbes2Open decrypts data under PBES2 with the given parameters (DER).
func pbes2Open(paramsDER, password, data []byte) ([]byte, error) {
	var params pkcs8PBES2
	if _, err := asn1.Unmarshal(paramsDER, &params); err != nil {
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
	if kdf.Iterations <= 0 || kdf.Iterations > maxIterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d out of range", kdf.Iterations)
	}
	key, err := pbkdf2.Key(prf, string(password), kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	return cbcOpen(block, iv, data)
}
