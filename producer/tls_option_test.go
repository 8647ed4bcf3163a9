package producer

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
)

// TestTLSOptionTakesACopy: the TLS option's doc says cfg is cloned, so
// the caller's later changes to it do not reach the producer's
// connections (nor race with their handshakes). The producer used the
// caller's value for every dial whose cfg named a ServerName, and a cfg
// whose trust was changed after New made the next dials fail verification.
func TestTLSOptionTakesACopy(t *testing.T) {
	k := newPKI(t)
	other, err := testcerts.NewCA("someone else")
	require.NoError(t, err)
	addr, results := tlsServer(t, k.server, nil)
	cfg := &tls.Config{RootCAs: k.ca.Pool(), ServerName: "127.0.0.1"}
	p, err := New(BootstrapServers(addr), TLS(cfg), DeliveryTimeout(10*time.Minute), RetryBackoff(50*time.Millisecond))
	require.NoError(t, err)
	defer closeSoon(p)
	// After New, the caller reuses its config for something else.
	cfg.RootCAs = other.Pool()
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, nil)
	select {
	case err := <-results:
		require.NoError(t, err, "the handshake used the caller's changed config")
	case <-time.After(time.Minute):
		t.Fatal("no handshake")
	}
}
