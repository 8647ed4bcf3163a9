package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// plainAuth accepts PLAIN alice/secret.
func plainAuth(mech string, msg []byte) ([]byte, error) {
	parts := strings.Split(string(msg), "\x00")
	if mech != "PLAIN" || len(parts) != 3 || parts[1] != "alice" || parts[2] != "secret" {
		return nil, errors.New("bad credentials")
	}
	return nil, nil
}

// TestSASLListener: with Config.SASL a connection must authenticate before
// anything but ApiVersions; wrong credentials are
// SASL_AUTHENTICATION_FAILED with the authenticator's text; an unknown
// mechanism is UNSUPPORTED_SASL_MECHANISM; the session lifetime is
// announced, a request read at or after its end closes the connection
// unhandled (counted by SessionsExpired), one read before is served, and
// a re-authentication on the same connection starts a new session
// (virtual clock).
func TestSASLListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const life = 3 * time.Second
		mn := memnet.New()
		c, err := Start(Config{Listen: mn.Listen, Topics: []TopicConfig{{Name: "t", Partitions: 1}},
			SASL: &SASLConfig{Mechanisms: []string{"PLAIN"}, Authenticate: plainAuth, SessionLifetime: life}})
		require.NoError(t, err)
		defer c.Close()
		ctx := context.Background()
		dial := func(user, pass string) (*protocol.Conn, error) {
			cfg := protocol.DialConfig{Dial: mn.Dial}
			if user != "" {
				cfg.SASL = plain.Auth{User: user, Pass: pass}.AsMechanism()
			}
			return protocol.Dial(ctx, c.Addr(), cfg)
		}

		_, err = dial("alice", "wrong")
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		require.ErrorContains(t, err, "bad credentials")

		// No SASL: ApiVersions works, Metadata closes the connection.
		conn, err := dial("", "")
		require.NoError(t, err)
		_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
		require.ErrorIs(t, err, protocol.ErrConnClosed)

		start := time.Now()
		conn, err = dial("alice", "secret")
		require.NoError(t, err)
		defer conn.Close()
		require.Equal(t, start.Add(life), conn.SessionEnd())
		time.Sleep(life - time.Millisecond)
		_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
		require.NoError(t, err, "just before the session ends")

		// Re-authenticate in place: a new session of the same lifetime.
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		r, err := conn.Do(ctx, hs)
		require.NoError(t, err)
		require.Zero(t, r.(*kmsg.SASLHandshakeResponse).ErrorCode)
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.SASLAuthBytes = []byte("\x00alice\x00secret")
		r, err = conn.Do(ctx, ar)
		require.NoError(t, err)
		require.Zero(t, r.(*kmsg.SASLAuthenticateResponse).ErrorCode)
		require.EqualValues(t, life.Milliseconds(), r.(*kmsg.SASLAuthenticateResponse).SessionLifetimeMillis)
		time.Sleep(life - time.Millisecond)
		_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
		require.NoError(t, err, "the re-authentication renewed the session")
		require.Zero(t, c.SessionsExpired())

		time.Sleep(time.Millisecond)
		_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
		require.ErrorIs(t, err, protocol.ErrConnClosed, "read when the session ended")
		require.EqualValues(t, 1, c.SessionsExpired())

		conn2, err := protocol.Dial(ctx, c.Addr(), protocol.DialConfig{Dial: mn.Dial,
			SASL: plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()})
		require.NoError(t, err)
		defer conn2.Close()
		hs.Mechanism = "SCRAM-SHA-256"
		r, err = conn2.Do(ctx, hs)
		require.NoError(t, err)
		require.Equal(t, kerr.UnsupportedSaslMechanism.Code, r.(*kmsg.SASLHandshakeResponse).ErrorCode)
		require.Equal(t, []string{"PLAIN"}, r.(*kmsg.SASLHandshakeResponse).SupportedMechanisms)
	})
}

// TestSASLReauthenticationRules: on an authenticated connection a
// SaslHandshake starts a re-authentication: until it succeeds requests
// other than SaslAuthenticate and ApiVersions close the connection; a
// second SaslHandshake before SaslAuthenticate closes it; a failed
// re-authentication leaves it unauthenticated, so the next request closes
// it. The control shows the same Metadata is served between sessions.
func TestSASLReauthenticationRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New()
		c, err := Start(Config{Listen: mn.Listen, Topics: []TopicConfig{{Name: "t", Partitions: 1}},
			SASL: &SASLConfig{Mechanisms: []string{"PLAIN"}, Authenticate: plainAuth}})
		require.NoError(t, err)
		defer c.Close()
		ctx := context.Background()
		login := func() *protocol.Conn {
			conn, err := protocol.Dial(ctx, c.Addr(), protocol.DialConfig{Dial: mn.Dial,
				SASL: plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()})
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
			require.NoError(t, err, "control: an authenticated connection is served")
			return conn
		}
		handshake := func(conn *protocol.Conn) error {
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Mechanism = "PLAIN"
			_, err := conn.Do(ctx, hs)
			return err
		}
		authenticate := func(conn *protocol.Conn, pass string) (int16, error) {
			ar := kmsg.NewPtrSASLAuthenticateRequest()
			ar.SASLAuthBytes = []byte("\x00alice\x00" + pass)
			r, err := conn.Do(ctx, ar)
			if err != nil {
				return 0, err
			}
			return r.(*kmsg.SASLAuthenticateResponse).ErrorCode, nil
		}

		conn := login()
		require.NoError(t, handshake(conn))
		_, err = conn.Do(ctx, kmsg.NewPtrApiVersionsRequest())
		require.NoError(t, err, "ApiVersions is allowed mid re-authentication")
		_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
		require.ErrorIs(t, err, protocol.ErrConnClosed, "Metadata mid re-authentication")

		conn = login()
		require.NoError(t, handshake(conn))
		require.ErrorIs(t, handshake(conn), protocol.ErrConnClosed, "second SaslHandshake before SaslAuthenticate")

		conn = login()
		require.NoError(t, handshake(conn))
		code, err := authenticate(conn, "wrong")
		require.NoError(t, err)
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, code)
		_, err = conn.Do(ctx, kmsg.NewPtrMetadataRequest())
		require.ErrorIs(t, err, protocol.ErrConnClosed, "unauthenticated after a failed re-authentication")
	})
}

// TestSASLConfigRequired: a SASLConfig without mechanisms or authenticator
// is rejected by Start.
func TestSASLConfigRequired(t *testing.T) {
	for _, sc := range []*SASLConfig{{Mechanisms: []string{"PLAIN"}}, {Authenticate: plainAuth}} {
		_, err := Start(Config{SASL: sc})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "SASL", ce.Name)
	}
}
