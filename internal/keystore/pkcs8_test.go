package keystore

import (
	"crypto/x509"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
)

// FuzzDecryptPKCS8 feeds arbitrary bytes to the encrypted-key decoder: it
// must return an error or a key, never panic.
func FuzzDecryptPKCS8(f *testing.F) {
	ca, err := testcerts.NewCA("fuzz")
	require.NoError(f, err)
	leaf, err := ca.Issue(testcerts.LeafOptions{CommonName: "x"})
	require.NoError(f, err)
	der, err := x509.MarshalPKCS8PrivateKey(leaf.Key)
	require.NoError(f, err)
	enc, err := testcerts.EncryptPKCS8(der, "pw")
	require.NoError(f, err)
	f.Add(enc, "pw")
	f.Add(enc, "wrong")
	f.Add(enc[:len(enc)/2], "pw")
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00}, "")
	f.Fuzz(func(t *testing.T, data []byte, pw string) {
		out, err := decryptPKCS8(data, pw)
		if err == nil {
			_, perr := x509.ParsePKCS8PrivateKey(out)
			require.NoError(t, perr, "a key returned without error parses")
		}
	})
}

func TestDecryptPKCS8RoundTrip(t *testing.T) {
	ca, err := testcerts.NewCA("pkcs8")
	require.NoError(t, err)
	leaf, err := ca.Issue(testcerts.LeafOptions{CommonName: "client"})
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(leaf.Key)
	require.NoError(t, err)
	enc, err := testcerts.EncryptPKCS8(der, "pw")
	require.NoError(t, err)
	out, err := decryptPKCS8(enc, "pw")
	require.NoError(t, err)
	assert.Equal(t, der, out)
	_, err = decryptPKCS8(enc, "pw2")
	assert.ErrorContains(t, err, "wrong password")
}
