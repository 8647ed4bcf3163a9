package lhkrb5

import (
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The SASL GSSAPI exchange as Kafka runs it (RFC 4752 over the Kerberos
// V5 GSS-API mechanism, RFC 4121), client side, without mutual
// authentication (as the Java client by default):
//
//	client: InitialContextToken{krb5 OID, AP-REQ}
//	broker: wrap{layers offered, max size}  (integrity only, acceptor key usage)
//	client: wrap{layer "none", size 0}      (integrity only, initiator key usage)
//	broker: empty (done)
//
// A broker that answers the AP-REQ with an AP-REP, or with nothing, gets
// an empty message back and sends its offer then (RFC 4752 section 3.1).

// krb5OID is the DER of the Kerberos V5 GSS-API mechanism OID
// 1.2.840.113554.1.2.2.
var krb5OID = []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02}

// RFC 4121 constants.
const (
	tokAPReq = 0x0100 // TOK_ID of an AP-REQ context token
	tokAPRep = 0x0200 // TOK_ID of an AP-REP context token
	tokWrap  = 0x0504 // TOK_ID of a wrap token

	flagSentByAcceptor = 0x01
	flagSealed         = 0x02
	flagAcceptorSubkey = 0x04

	gssConfFlag  = 16
	gssIntegFlag = 32
)

// layerNone is RFC 4752's "no security layer" bit, the only layer Kafka
// uses (TLS, if any, protects the connection).
const layerNone = 0x01

// step is where a GSSAPI session is in the exchange; each Challenge moves
// it to the next one.
type step int

const (
	stepContext  step = iota // AP-REQ sent, waiting for the context to be established
	stepLayers               // waiting for the broker's wrapped security-layer offer
	stepDone                 // our layer choice sent, waiting for the broker's end
	stepFinished             // the broker accepted; no more challenges
)

func (s step) String() string {
	switch s {
	case stepContext:
		return "context"
	case stepLayers:
		return "security layers"
	case stepDone:
		return "final"
	case stepFinished:
		return "finished"
	}
	return fmt.Sprintf("step(%d)", int(s))
}

// session is one SASL GSSAPI authentication, keyed by the service
// ticket's session key (no subkeys: the authenticator carries none and
// the broker, asked for no mutual authentication, sends none).
type session struct {
	key  types.EncryptionKey
	step step
}

// Challenge implements franz-go's sasl.Session.
func (s *session) Challenge(resp []byte) (bool, []byte, error) {
	switch s.step {
	case stepContext:
		// With the context established by the AP-REQ, a Java broker
		// answers with its security-layer offer at once. A broker that
		// authenticates itself although not asked to answers with an
		// AP-REP (or one with nothing to say, with nothing): the client
		// then sends nothing, and the offer comes next.
		if len(resp) == 0 || resp[0] == 0x60 {
			if len(resp) > 0 {
				if err := checkAPRep(resp); err != nil {
					return false, nil, fmt.Errorf("lhkrb5: broker's answer to the AP-REQ: %w", err)
				}
			}
			s.step = stepLayers
			return false, []byte{}, nil
		}
		return s.layers(resp)
	case stepLayers:
		return s.layers(resp)
	case stepDone:
		if len(resp) > 0 {
			return false, nil, fmt.Errorf("lhkrb5: broker sent %d bytes after the security-layer choice, want none", len(resp))
		}
		s.step = stepFinished
		return true, nil, nil
	}
	return false, nil, fmt.Errorf("lhkrb5: challenge in step %v", s.step)
}

// layers answers the broker's wrapped security-layer offer.
func (s *session) layers(resp []byte) (bool, []byte, error) {
	offer, err := unwrap(resp, s.key)
	if err != nil {
		return false, nil, fmt.Errorf("lhkrb5: broker's security-layer offer: %w", err)
	}
	if len(offer) != 4 {
		return false, nil, fmt.Errorf("lhkrb5: broker's security-layer offer has %d bytes, want 4", len(offer))
	}
	if offer[0]&layerNone == 0 {
		return false, nil, fmt.Errorf("lhkrb5: broker offers security layers %#02x without \"none\"; only \"none\" is supported (use TLS for confidentiality)", offer[0])
	}
	// Layer none, maximum message size 0 (none without a layer), no
	// authorization id: the broker authorizes the principal.
	reply, err := wrap([]byte{layerNone, 0, 0, 0}, s.key)
	if err != nil {
		return false, nil, fmt.Errorf("lhkrb5: wrap security-layer choice: %w", err)
	}
	s.step = stepDone
	return false, reply, nil
}

// gssChecksum is the authenticator checksum of RFC 4121 section 4.1.1
// (type 0x8003): no channel bindings, context flags integrity and
// confidentiality (what the Java client requests), no delegation.
func gssChecksum() []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b[0:4], 16) // length of the bindings hash
	binary.LittleEndian.PutUint32(b[20:24], gssIntegFlag|gssConfFlag)
	return b
}

// initialToken builds the first message: the GSS-API InitialContextToken
// (RFC 2743 section 3.1) around TOK_ID 0x0100 and a Kerberos AP-REQ for
// ticket, its authenticator encrypted with the ticket's session key.
func initialToken(realm string, cname types.PrincipalName, ticket messages.Ticket, key types.EncryptionKey) ([]byte, error) {
	auth, err := types.NewAuthenticator(realm, cname)
	if err != nil {
		return nil, err
	}
	auth.Cksum = types.Checksum{CksumType: chksumtype.GSSAPI, Checksum: gssChecksum()}
	req, err := messages.NewAPReq(ticket, key, auth)
	if err != nil {
		return nil, err
	}
	apreq, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	inner := make([]byte, 0, len(krb5OID)+2+len(apreq))
	inner = append(inner, krb5OID...)
	inner = binary.BigEndian.AppendUint16(inner, tokAPReq)
	inner = append(inner, apreq...)
	return append(append([]byte{0x60}, derLength(len(inner))...), inner...), nil
}

// derLength is the DER encoding of a length.
func derLength(n int) []byte {
	if n < 0x80 {
		return []byte{byte(n)}
	}
	var b []byte
	for v := n; v > 0; v >>= 8 {
		b = append([]byte{byte(v)}, b...)
	}
	return append([]byte{0x80 | byte(len(b))}, b...)
}

// contextToken splits a GSS-API context token (0x60, DER length, the
// krb5 OID, TOK_ID, body) and returns TOK_ID and body.
func contextToken(b []byte) (uint16, []byte, error) {
	if len(b) < 2 || b[0] != 0x60 {
		return 0, nil, errors.New("not a GSS-API context token")
	}
	n, rest, err := readDERLength(b[1:])
	if err != nil {
		return 0, nil, err
	}
	if n != len(rest) {
		return 0, nil, fmt.Errorf("context token length %d, have %d bytes", n, len(rest))
	}
	if len(rest) < len(krb5OID)+2 || !hmac.Equal(rest[:len(krb5OID)], krb5OID) {
		return 0, nil, errors.New("context token is not of the Kerberos V5 mechanism")
	}
	rest = rest[len(krb5OID):]
	return binary.BigEndian.Uint16(rest), rest[2:], nil
}

func readDERLength(b []byte) (int, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errors.New("truncated length")
	}
	if b[0] < 0x80 {
		return int(b[0]), b[1:], nil
	}
	k := int(b[0] & 0x7f)
	if k == 0 || k > 4 || len(b) < 1+k {
		return 0, nil, errors.New("bad length")
	}
	n := 0
	for _, c := range b[1 : 1+k] {
		n = n<<8 | int(c)
	}
	return n, b[1+k:], nil
}

// checkAPRep accepts a context token holding an AP-REP, which a broker
// that always authenticates itself may send although it was not asked
// to; its content does not change the exchange.
func checkAPRep(b []byte) error {
	id, body, err := contextToken(b)
	if err != nil {
		return err
	}
	if id != tokAPRep {
		return fmt.Errorf("context token TOK_ID %#04x, want AP-REP (0x0200)", id)
	}
	var rep messages.APRep
	return rep.Unmarshal(body)
}

// wrap is GSS_Wrap without confidentiality (RFC 4121 section 4.2.4): the
// message in the clear, then its checksum, from the initiator.
func wrap(msg []byte, key types.EncryptionKey) ([]byte, error) {
	t, err := gssapi.NewInitiatorWrapToken(msg, key)
	if err != nil {
		return nil, err
	}
	return t.Marshal()
}

// unwrap is GSS_Unwrap of a wrap token from the acceptor without
// confidentiality (the broker wraps its security-layer offer so): it
// checks the header and the checksum over the message and the header
// with EC and RRC zero, undoing a right rotation by RRC first (RFC 4121
// section 4.2.5), and returns the message.
func unwrap(b []byte, key types.EncryptionKey) ([]byte, error) {
	if len(b) < gssapi.HdrLen {
		return nil, fmt.Errorf("wrap token of %d bytes, shorter than its header", len(b))
	}
	if id := binary.BigEndian.Uint16(b); id != tokWrap {
		if id == 0x0201 {
			return nil, errors.New("RFC 1964 wrap token (DES or RC4 key): only AES and newer encryption types are supported")
		}
		return nil, fmt.Errorf("token %#04x is not a wrap token (0x0504)", id)
	}
	flags := b[2]
	switch {
	case flags&flagSentByAcceptor == 0:
		return nil, errors.New("wrap token not sent by the acceptor")
	case flags&flagSealed != 0:
		return nil, errors.New("wrap token is encrypted; the broker must wrap the security-layer offer without confidentiality")
	case flags&flagAcceptorSubkey != 0:
		return nil, errors.New("wrap token uses an acceptor subkey, which was not negotiated")
	case b[3] != gssapi.FillerByte:
		return nil, fmt.Errorf("wrap token filler %#02x, want 0xff", b[3])
	}
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, err
	}
	ec := int(binary.BigEndian.Uint16(b[4:6]))
	if want := et.GetHMACBitLength() / 8; ec != want {
		return nil, fmt.Errorf("wrap token checksum of %d bytes, want %d for encryption type %d", ec, want, key.KeyType)
	}
	rrc := int(binary.BigEndian.Uint16(b[6:8]))
	data := append([]byte(nil), b[gssapi.HdrLen:]...)
	if len(data) < ec {
		return nil, fmt.Errorf("wrap token of %d bytes after its header, shorter than its %d-byte checksum", len(data), ec)
	}
	if len(data) > 0 {
		r := rrc % len(data)
		data = append(data[r:], data[:r]...)
	}
	t := gssapi.WrapToken{
		Flags:     flags,
		EC:        uint16(ec),
		SndSeqNum: binary.BigEndian.Uint64(b[8:16]),
		Payload:   data[:len(data)-ec],
		CheckSum:  data[len(data)-ec:],
	}
	if ok, err := t.Verify(key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return nil, fmt.Errorf("wrap token checksum does not verify with the session key: %w", err)
	}
	return t.Payload, nil
}
