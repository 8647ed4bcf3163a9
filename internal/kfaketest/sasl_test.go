package kfaketest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/longhaul-kafka/longhaul/producer"
)

// recordingHandler keeps every slog record.
type recordingHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count(level slog.Level, substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

// TestPlainWithoutTLSWarnsOnce: SASL PLAIN on a plaintext connection logs
// one warning per producer however many connections it opens; SCRAM, or
// PLAIN over TLS, logs none. kfake authenticates both mechanisms.
func TestPlainWithoutTLSWarnsOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(4, "t"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", "alice-pw"), kfake.Superuser("SCRAM-SHA-256", "bob", "bob-pw"))
	require.NoError(t, err)
	defer c.Close()
	const clear = "clear text"

	run := func(opts ...producer.Opt) *recordingHandler {
		h := &recordingHandler{}
		opts = append(opts, producer.BootstrapServers(c.ListenAddrs()...), producer.Logger(slog.New(h)), producer.Linger(0))
		p, err := producer.New(opts...)
		require.NoError(t, err)
		defer p.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := range 4 {
			r := &producer.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}
			r.SetPartition(int32(i))
			require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
		}
		return h
	}
	h := run(producer.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()))
	assert.Equal(t, 1, h.count(slog.LevelWarn, clear), "PLAIN without TLS: one warning")
	h = run(producer.Property("security.protocol", "SASL_PLAINTEXT"),
		producer.Property("sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-pw";`))
	assert.Equal(t, 1, h.count(slog.LevelWarn, clear), "PLAIN from properties: one warning")
	h = run(producer.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha256Mechanism()))
	assert.Zero(t, h.count(slog.LevelWarn, clear), "SCRAM never sends the password")

	// PLAIN over TLS: no warning (New only; no TLS broker needed).
	h = &recordingHandler{}
	p, err := producer.New(producer.BootstrapServers("127.0.0.1:1"), producer.Logger(slog.New(h)), producer.TLS(&tls.Config{}),
		producer.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()))
	require.NoError(t, err)
	p.Close(context.Background())
	assert.Zero(t, h.count(slog.LevelWarn, clear))
}
