package lhkrb5

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/stretchr/testify/require"
)

func testKey(t testing.TB) types.EncryptionKey {
	k := types.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: make([]byte, 32)}
	_, err := rand.Read(k.KeyValue)
	require.NoError(t, err)
	return k
}

// acceptorWrap is what the broker sends: a wrap token without
// confidentiality from the acceptor, its data rotated right by rrc.
func acceptorWrap(t testing.TB, msg []byte, key types.EncryptionKey, flags byte, rrc int) []byte {
	t.Helper()
	w := gssapi.WrapToken{Flags: flags, EC: 12, SndSeqNum: 7, Payload: msg}
	require.NoError(t, w.SetCheckSum(key, keyusage.GSSAPI_ACCEPTOR_SEAL))
	b, err := w.Marshal()
	require.NoError(t, err)
	if rrc > 0 {
		data := b[gssapi.HdrLen:]
		r := rrc % len(data)
		rot := append(append([]byte{}, data[len(data)-r:]...), data[:len(data)-r]...)
		copy(data, rot)
		binary.BigEndian.PutUint16(b[6:8], uint16(rrc))
	}
	return b
}

// verifyInitiatorWrap is the broker's check of our reply: it returns the
// message of a wrap token from the initiator.
func verifyInitiatorWrap(t testing.TB, b []byte, key types.EncryptionKey) []byte {
	t.Helper()
	var w gssapi.WrapToken
	require.NoError(t, w.Unmarshal(b, false))
	ok, err := w.Verify(key, keyusage.GSSAPI_INITIATOR_SEAL)
	require.NoError(t, err)
	require.True(t, ok)
	return w.Payload
}

var offer = []byte{0x07, 0x00, 0x10, 0x00} // layers none, integrity, privacy; 4096 bytes

// TestSessionExchange runs the client side of the exchange against
// tokens made as a Java broker makes them: the offer right after the
// AP-REQ (Kafka), or after an empty answer (RFC 4752's general form),
// with its data rotated (RRC, as some acceptors send) or not. Our
// reply is layer none, size 0, and verifies as an initiator token with
// the session key; the empty end finishes the session.
func TestSessionExchange(t *testing.T) {
	key := testKey(t)
	for _, c := range []struct {
		name       string
		emptyFirst bool
		rrc        int
	}{
		{"OfferFirst", false, 0},
		{"EmptyFirst", true, 0},
		{"Rotated", false, 5},
		{"RotatedPastLength", false, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &session{key: key}
			if c.emptyFirst {
				done, out, err := s.Challenge(nil)
				require.NoError(t, err)
				require.False(t, done)
				require.Empty(t, out)
				require.NotNil(t, out, "an empty message, not none")
			}
			done, reply, err := s.Challenge(acceptorWrap(t, offer, key, flagSentByAcceptor, c.rrc))
			require.NoError(t, err)
			require.False(t, done)
			require.Equal(t, []byte{layerNone, 0, 0, 0}, verifyInitiatorWrap(t, reply, key))
			done, out, err := s.Challenge(nil)
			require.NoError(t, err)
			require.True(t, done)
			require.Nil(t, out)
			_, _, err = s.Challenge(nil)
			require.ErrorContains(t, err, "challenge in step finished")
		})
	}
}

// TestSessionRejects covers every offer the client must refuse: a
// checksum that does not verify (tampered message, another key, the
// initiator's key usage), a token not from the acceptor, encrypted, with
// an acceptor subkey, with a short checksum, an old-style (RFC 1964)
// token, an offer without layer "none" or not 4 bytes, and a non-empty
// end. The unchanged offer (the control) is accepted.
func TestSessionRejects(t *testing.T) {
	key := testKey(t)
	good := acceptorWrap(t, offer, key, flagSentByAcceptor, 0)
	_, _, err := (&session{key: key}).Challenge(good)
	require.NoError(t, err, "control")

	tampered := bytes.Clone(good)
	tampered[gssapi.HdrLen] ^= 0x01
	initiatorUsage := func() []byte {
		w := gssapi.WrapToken{Flags: flagSentByAcceptor, EC: 12, Payload: offer}
		require.NoError(t, w.SetCheckSum(key, keyusage.GSSAPI_INITIATOR_SEAL))
		b, err := w.Marshal()
		require.NoError(t, err)
		return b
	}()
	shortEC := bytes.Clone(good)
	binary.BigEndian.PutUint16(shortEC[4:6], 4)
	badFiller := bytes.Clone(good)
	badFiller[3] = 0
	old := bytes.Clone(good)
	binary.BigEndian.PutUint16(old[0:2], 0x0201)
	for _, c := range []struct {
		name  string
		token []byte
		want  string
	}{
		{"Tampered", tampered, "does not verify"},
		{"OtherKey", acceptorWrap(t, offer, testKey(t), flagSentByAcceptor, 0), "does not verify"},
		{"InitiatorUsage", initiatorUsage, "does not verify"},
		{"FromInitiator", acceptorWrap(t, offer, key, 0, 0), "not sent by the acceptor"},
		{"Sealed", acceptorWrap(t, offer, key, flagSentByAcceptor|flagSealed, 0), "encrypted"},
		{"AcceptorSubkey", acceptorWrap(t, offer, key, flagSentByAcceptor|flagAcceptorSubkey, 0), "acceptor subkey"},
		{"ShortChecksum", shortEC, "checksum of 4 bytes, want 12"},
		{"Filler", badFiller, "filler"},
		{"RFC1964", old, "RFC 1964"},
		{"Truncated", good[:10], "shorter than its header"},
		{"NoLayerNone", acceptorWrap(t, []byte{0x06, 0, 0x10, 0}, key, flagSentByAcceptor, 0), `without "none"`},
		{"FiveBytes", acceptorWrap(t, []byte{0x01, 0, 0, 0, 0}, key, flagSentByAcceptor, 0), "has 5 bytes, want 4"},
		{"NotAnAPRep", mustInitialToken(t, key), "want AP-REP"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := (&session{key: key}).Challenge(c.token)
			require.ErrorContains(t, err, c.want)
		})
	}
	s := &session{key: key}
	_, _, err = s.Challenge(good)
	require.NoError(t, err)
	_, _, err = s.Challenge([]byte{1})
	require.ErrorContains(t, err, "after the security-layer choice")
}

func testTicket() messages.Ticket {
	return messages.Ticket{
		TktVNO:  5,
		Realm:   "EXAMPLE.TEST",
		SName:   types.NewPrincipalName(nametype.KRB_NT_SRV_INST, "kafka/localhost"),
		EncPart: types.EncryptedData{EType: etypeID.AES256_CTS_HMAC_SHA1_96, KVNO: 1, Cipher: []byte("opaque to the client")},
	}
}

func mustInitialToken(t testing.TB, key types.EncryptionKey) []byte {
	t.Helper()
	b, err := initialToken("EXAMPLE.TEST", types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, "app"), testTicket(), key)
	require.NoError(t, err)
	return b
}

// TestInitialToken decodes the first message as a broker does: a GSS-API
// InitialContextToken of the Kerberos V5 mechanism with TOK_ID 0x0100
// around an AP-REQ for the ticket, without the mutual-required option,
// whose authenticator (encrypted with the session key) names the client
// and carries the 0x8003 checksum: 16-byte empty bindings, flags
// integrity and confidentiality only.
func TestInitialToken(t *testing.T) {
	key := testKey(t)
	tok := mustInitialToken(t, key)
	id, body, err := contextToken(tok)
	require.NoError(t, err)
	require.EqualValues(t, tokAPReq, id)
	var req messages.APReq
	require.NoError(t, req.Unmarshal(body))
	require.Equal(t, "kafka/localhost", req.Ticket.SName.PrincipalNameString())
	require.False(t, types.IsFlagSet(&req.APOptions, 2), "mutual-required must not be set")
	require.NoError(t, req.DecryptAuthenticator(key))
	a := req.Authenticator
	require.Equal(t, "EXAMPLE.TEST", a.CRealm)
	require.Equal(t, "app", a.CName.PrincipalNameString())
	require.WithinDuration(t, time.Now(), a.CTime, time.Minute)
	require.EqualValues(t, chksumtype.GSSAPI, a.Cksum.CksumType)
	want := make([]byte, 24)
	want[0] = 16
	want[20] = gssIntegFlag | gssConfFlag
	require.Equal(t, want, a.Cksum.Checksum)

	other := testKey(t)
	require.Error(t, req.DecryptAuthenticator(other), "control: another key cannot read the authenticator")
}

// TestDERLength round-trips the short and long forms of a DER length and
// rejects truncated ones.
func TestDERLength(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 24} {
		b := derLength(n)
		got, rest, err := readDERLength(append(b, 0xAA))
		require.NoError(t, err, "%d", n)
		require.Equal(t, n, got)
		require.Equal(t, []byte{0xAA}, rest)
	}
	require.Equal(t, []byte{0x81, 0x80}, derLength(128))
	for _, b := range [][]byte{nil, {0x82, 0x01}, {0x80}, {0x85, 1, 2, 3, 4, 5}} {
		_, _, err := readDERLength(b)
		require.Error(t, err, "%x", b)
	}
	_, _, err := contextToken([]byte{0x60, 0x05, 0x06})
	require.ErrorContains(t, err, "length 5")
}

// FuzzUnwrap feeds arbitrary broker answers to the decoders: they never
// panic, and a token unwrap accepts is a header, the message and a
// 12-byte checksum.
func FuzzUnwrap(f *testing.F) {
	key := types.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: bytes.Repeat([]byte{7}, 32)}
	f.Add(acceptorWrap(f, offer, key, flagSentByAcceptor, 0))
	f.Add(acceptorWrap(f, offer, key, flagSentByAcceptor, 3))
	f.Add([]byte{0x05, 0x04, 0x01, 0xff, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(mustInitialToken(f, key))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := unwrap(b, key)
		if err != nil {
			return
		}
		if len(msg) != len(b)-gssapi.HdrLen-12 {
			t.Fatalf("accepted a %d-byte token with a %d-byte message", len(b), len(msg))
		}
		s := &session{key: key}
		s.Challenge(b)
		checkAPRep(b)
	})
}
