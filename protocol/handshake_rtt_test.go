package protocol

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHandshakeRTT: HandshakeRTT is how long the ApiVersions exchange that
// opened the connection took (a broker answering it 30 ms after reading
// it, on synctest's virtual clock), not the time since, nor any later
// request's.
func TestHandshakeRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		delay := 30 * time.Millisecond
		b.onFrame = func([]byte) { time.Sleep(delay) }
		c, err := Dial(context.Background(), "pipe", DialConfig{Dial: b.pipeDial})
		require.NoError(t, err)
		defer c.Close()
		delay = 0
		time.Sleep(time.Second)
		require.Equal(t, 30*time.Millisecond, c.HandshakeRTT())
	})
}
