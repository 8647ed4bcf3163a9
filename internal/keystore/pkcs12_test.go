package keystore

import (
	"bytes"
	"crypto"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
)

// The stores in testdata were written by keytool (Java 17, current and
// -Dkeystore.pkcs12.legacy formats) and openssl 3 (default, -legacy, and
// with neither encryption nor MAC) by testdata/gen.sh, all with the
// password "changeit", from ca.pem, client.pem and client.key.

func readPEMCert(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	b, _ := pem.Decode(data)
	require.NotNil(t, b)
	c, err := x509.ParseCertificate(b.Bytes)
	require.NoError(t, err)
	return c
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

func TestDecodeKeyStoreFromTools(t *testing.T) {
	ca, client := readPEMCert(t, "ca.pem"), readPEMCert(t, "client.pem")
	pair, err := tls.X509KeyPair(readFile(t, "client.pem"), readFile(t, "client.key"))
	require.NoError(t, err)
	wantPub := pair.PrivateKey.(crypto.Signer).Public()
	for _, name := range []string{"keytool-key.p12", "keytool-legacy-key.p12", "openssl-key.p12",
		"openssl-legacy-key.p12", "openssl-plain-key.p12"} {
		t.Run(name, func(t *testing.T) {
			key, chain, err := decodeKeyStore(readFile(t, name), "changeit")
			require.NoError(t, err)
			assert.True(t, key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(wantPub),
				"the store's key is client.key")
			require.Len(t, chain, 2)
			assert.True(t, chain[0].Equal(client), "leaf first")
			assert.True(t, chain[1].Equal(ca), "then its issuer")
		})
	}
}

func TestDecodeTrustStoreFromTools(t *testing.T) {
	ca := readPEMCert(t, "ca.pem")
	for _, name := range []string{"keytool-trust.p12", "keytool-legacy-trust.p12", "openssl-trust.p12",
		"openssl-legacy-trust.p12"} {
		t.Run(name, func(t *testing.T) {
			certs, err := decodeTrustStore(readFile(t, name), "changeit")
			require.NoError(t, err)
			require.Len(t, certs, 1)
			assert.True(t, certs[0].Equal(ca))
		})
	}
	// A key store used as a trust store: its CA is trusted (no keytool
	// marks, and not the key's own certificate); the client's is not.
	certs, err := decodeTrustStore(readFile(t, "openssl-key.p12"), "changeit")
	require.NoError(t, err)
	require.Len(t, certs, 1)
	assert.True(t, certs[0].Equal(ca))
}

func TestDecodePKCS12WrongPassword(t *testing.T) {
	for _, name := range []string{"keytool-key.p12", "keytool-legacy-key.p12", "openssl-key.p12",
		"openssl-legacy-key.p12", "keytool-trust.p12", "openssl-legacy-trust.p12"} {
		t.Run(name, func(t *testing.T) {
			_, err := decodePKCS12(readFile(t, name), "changeme")
			assert.ErrorIs(t, err, errWrongPassword, "the MAC refuses it")
		})
	}
	// Without a MAC the key's encryption refuses a wrong password.
	ks, err := testcerts.PKCS12(mustLeaf(t).Key, []*x509.Certificate{mustLeaf(t).Cert}, "right")
	require.NoError(t, err)
	_, _, err = decodeKeyStore(ks, "wrong")
	assert.ErrorIs(t, err, errWrongPassword)
}

func mustLeaf(t *testing.T) *testcerts.Leaf {
	t.Helper()
	ca, err := testcerts.NewCA("p12")
	require.NoError(t, err)
	leaf, err := ca.Issue(testcerts.LeafOptions{CommonName: "c", Client: true})
	require.NoError(t, err)
	return leaf
}

func TestDecodeKeyStoreNeedsOneMatchingKey(t *testing.T) {
	_, _, err := decodeKeyStore(readFile(t, "openssl-trust.p12"), "changeit")
	assert.ErrorContains(t, err, "0 private keys")

	a, b := mustLeaf(t), mustLeaf(t)
	ks, err := testcerts.PKCS12(a.Key, []*x509.Certificate{b.Cert}, "pw")
	require.NoError(t, err)
	_, _, err = decodeKeyStore(ks, "pw")
	assert.ErrorContains(t, err, "no certificate in the store belongs to its private key")
}

// TestDecodePKCS12Refusals: formats no current tool writes by default are
// named in the error, and a hostile iteration count is refused before any
// hashing.
func TestDecodePKCS12Refusals(t *testing.T) {
	_, err := decodePKCS12([]byte("not a store"), "")
	assert.ErrorContains(t, err, "not a PKCS12 file")

	data := readFile(t, "openssl-key.p12")
	var pfx p12PFX
	_, err = asn1.Unmarshal(data, &pfx)
	require.NoError(t, err)

	pfx.MacData.Iterations = maxIterations + 1
	_, err = decodePKCS12(remarshal(t, pfx), "changeit")
	assert.ErrorContains(t, err, "out of range")

	pfx.MacData.Iterations = 2048
	pfx.MacData.Mac.Algorithm.Algorithm = oidPBMAC1
	_, err = decodePKCS12(remarshal(t, pfx), "changeit")
	assert.ErrorContains(t, err, "PBMAC1")

	pfx.Version = 2
	_, err = decodePKCS12(remarshal(t, pfx), "changeit")
	assert.ErrorContains(t, err, "version 2")
}

// TestRC2Vectors decrypts RFC 2268 section 5's test vectors.
func TestRC2Vectors(t *testing.T) {
	for _, v := range []struct {
		key, plain, cipher string
		bits               int
	}{
		{"0000000000000000", "0000000000000000", "ebb773f993278eff", 63},
		{"ffffffffffffffff", "ffffffffffffffff", "278b27e42e2f0d49", 64},
		{"3000000000000000", "1000000000000001", "30649edf9be7d2c2", 64},
		{"88", "0000000000000000", "61a8a244adacccf0", 64},
		{"88bca90e90875a", "0000000000000000", "6ccf4308974c267f", 64},
		{"88bca90e90875a7f0f79c384627bafb2", "0000000000000000", "1a807d272bbe5db1", 64},
		{"88bca90e90875a7f0f79c384627bafb2", "0000000000000000", "2269552ab0f85ca6", 128},
		{"88bca90e90875a7f0f79c384627bafb216f80a6f85920584c42fceb0be255daf1e", "0000000000000000", "5b78d3a43dfff1f1", 129},
	} {
		key, _ := hex.DecodeString(v.key)
		c, err := newRC2(key, v.bits)
		require.NoError(t, err)
		ct, _ := hex.DecodeString(v.cipher)
		out := make([]byte, 8)
		c.Decrypt(out, ct)
		assert.Equal(t, v.plain, hex.EncodeToString(out), "key %s, %d bits", v.key, v.bits)
	}
}

// TestP12KDFVector checks the PKCS12 key derivation against a value
// openssl computes: the MAC of openssl-legacy-key.p12 verifies only if
// the derivation is right, and a derivation off by one block does not.
func TestP12KDFVector(t *testing.T) {
	data := readFile(t, "openssl-legacy-key.p12")
	var pfx p12PFX
	_, err := asn1.Unmarshal(data, &pfx)
	require.NoError(t, err)
	authSafe, err := p12Data(pfx.AuthSafe)
	require.NoError(t, err)
	require.NoError(t, p12CheckMAC(&pfx.MacData, authSafe, "changeit"))
	m := pfx.MacData
	m.Iterations--
	assert.ErrorIs(t, p12CheckMAC(&m, authSafe, "changeit"), errWrongPassword)
	assert.False(t, bytes.Equal(
		p12KDF(sha1.New, 64, bmpPassword("a"), []byte("salt"), 1, 1, 24),
		p12KDF(sha1.New, 64, bmpPassword("a"), []byte("salt"), 2, 1, 24)), "the purpose id changes the output")
}

// FuzzDecodePKCS12 feeds arbitrary bytes to the store decoder: an error
// or a store, never a panic.
func FuzzDecodePKCS12(f *testing.F) {
	for _, name := range []string{"openssl-key.p12", "openssl-legacy-trust.p12", "openssl-plain-key.p12"} { // low iteration counts: fast execs {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(data, "changeit")
	}
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x03}, "")
	f.Fuzz(func(t *testing.T, data []byte, pw string) {
		if st, err := decodePKCS12(data, pw); err == nil {
			for _, c := range st.certs {
				require.NotNil(t, c.cert)
			}
		}
		_, _, _ = decodeKeyStore(data, pw)
		_, _ = decodeTrustStore(data, pw)
	})
}

func remarshal(t *testing.T, pfx p12PFX) []byte {
	t.Helper()
	out, err := asn1.Marshal(pfx)
	require.NoError(t, err)
	return out
}
