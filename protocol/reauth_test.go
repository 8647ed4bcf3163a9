package protocol

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestSessionLifetime: the SessionLifetimeMs of SaslAuthenticate v1+
// (KIP-368) sets SessionEnd to the instant the last SASL message was sent
// plus the lifetime, and RenewAt to a random point in 85..95 % of it,
// spread over that range; SaslAuthenticate v0, a lifetime of 0 and no SASL
// leave both zero (virtual clock: the handshake itself takes no time).
func TestSessionLifetime(t *testing.T) {
	const life = 10 * time.Second
	dial := func(t *testing.T, lifetime time.Duration, authMax int16, withSASL bool) *Conn {
		b := newFakeBroker(t)
		b.mechs = map[string]bool{"PLAIN": true}
		b.user, b.pass = "alice", "secret"
		b.lifetime = lifetime
		b.keys = withKey(b.keys, 36, 0, authMax)
		cfg := DialConfig{Dial: b.pipeDial}
		if withSASL {
			cfg.SASL = plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()
		}
		c, err := Dial(context.Background(), "pipe:9092", cfg)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(); b.closeConns() })
		return c
	}
	t.Run("announced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			lo, hi := life, time.Duration(0)
			for range 200 {
				start := time.Now()
				c := dial(t, life, 2, true)
				require.Equal(t, start.Add(life), c.SessionEnd())
				renew := c.RenewAt().Sub(start)
				require.GreaterOrEqual(t, renew, life*85/100)
				require.LessOrEqual(t, renew, life*95/100)
				seen[renew] = true
				lo, hi = min(lo, renew), max(hi, renew)
				time.Sleep(time.Millisecond) // a new start for each dial
			}
			// Jittered, not one fixed fraction: 200 draws cover most
			// of the 1 s range.
			require.Greater(t, len(seen), 150)
			require.Greater(t, hi-lo, 800*time.Millisecond)
		})
	})
	t.Run("v0 has no lifetime", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := dial(t, life, 0, true)
			require.True(t, c.SessionEnd().IsZero())
			require.True(t, c.RenewAt().IsZero())
		})
	})
	t.Run("lifetime 0", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := dial(t, 0, 2, true)
			require.True(t, c.SessionEnd().IsZero())
			require.True(t, c.RenewAt().IsZero())
		})
	})
	t.Run("no SASL", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := dial(t, life, 2, false)
			require.True(t, c.SessionEnd().IsZero())
			require.True(t, c.RenewAt().IsZero())
		})
	})
}

// hostMech is a PLAIN mechanism that records the host it is given.
type hostMech struct {
	sasl.Mechanism
	got *string
}

func (m hostMech) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	*m.got = host
	return m.Mechanism.Authenticate(ctx, host)
}

// TestSASLGetsHostPort: the mechanism gets the broker's host:port, as
// franz-go's sasl.Mechanism contract says (its AWS_MSK_IAM signs the host
// and rejects an address without a port).
func TestSASLGetsHostPort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		b.mechs = map[string]bool{"PLAIN": true}
		b.user, b.pass = "alice", "secret"
		var got string
		c, err := Dial(context.Background(), "b-1.example.com:9098", DialConfig{Dial: b.pipeDial,
			SASL: hostMech{plain.Auth{User: "alice", Pass: "secret"}.AsMechanism(), &got}})
		require.NoError(t, err)
		c.Close()
		b.closeConns()
		require.Equal(t, "b-1.example.com:9098", got)
	})
}
