package producer

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// mskProps is the client config MSK documents for IAM, as a Java user
// pastes it.
func mskProps() map[string]string {
	return map[string]string{
		"bootstrap.servers":                  "b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9098",
		"security.protocol":                  "SASL_SSL",
		"sasl.mechanism":                     "AWS_MSK_IAM",
		"sasl.jaas.config":                   "software.amazon.msk.auth.iam.IAMLoginModule required;",
		"sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
	}
}

// TestMSKIAMProperties: the Java MSK IAM config alone is a ConfigError on
// sasl.mechanism pointing to the lhaws option (the core reads no AWS
// credentials); with a SASL option (what lhaws.MSKIAM is) the same config
// is accepted and the option's mechanism used. IAMLoginModule options
// naming another identity, and callback handler classes other than MSK's,
// are ConfigErrors rather than ignored.
func TestMSKIAMProperties(t *testing.T) {
	_, err := NewFromProperties(mskProps())
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sasl.mechanism", ce.Property)
	assert.Contains(t, ce.Reason, "lhaws.MSKIAM")
	assert.Contains(t, ce.Reason, "producer/plugin/lhaws")
	require.ErrorIs(t, err, ErrInvalidConfig)

	mech := aws.Auth{AccessKey: "AKID", SecretKey: "s"}.AsManagedStreamingIAMMechanism()
	p, err := NewFromProperties(mskProps(), SASL(mech))
	require.NoError(t, err)
	assert.Equal(t, "AWS_MSK_IAM", p.cfg.sasl.Name())
	assert.NotNil(t, p.cfg.tls, "SASL_SSL: TLS from the ssl.* properties")
	closeSoon(p)

	for prop, v := range map[string]string{
		"sasl.jaas.config":                   `software.amazon.msk.auth.iam.IAMLoginModule required awsRoleArn="arn:aws:iam::123456789012:role/kafka";`,
		"sasl.client.callback.handler.class": "com.example.MyCallbackHandler",
	} {
		m := mskProps()
		m[prop] = v
		_, err := NewFromProperties(m, SASL(mech))
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, prop)
		assert.Equal(t, prop, ce.Property)
	}
	m := mskProps()
	m["sasl.jaas.config"] = `software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="dev";`
	_, err = NewFromProperties(m, SASL(mech))
	require.ErrorContains(t, err, "config.WithSharedConfigProfile")
	// With several options the error names the same one every time.
	m["sasl.jaas.config"] = `software.amazon.msk.auth.iam.IAMLoginModule required awsRoleArn="r" awsProfileName="dev";`
	for range 10 {
		_, err = NewFromProperties(m, SASL(mech))
		require.ErrorContains(t, err, "IAMLoginModule option awsProfileName:")
	}
}

// TestMSKIAMWithoutTLSWarns: AWS_MSK_IAM without TLS logs one warning
// (its signed login is replayable); with TLS none.
func TestMSKIAMWithoutTLSWarns(t *testing.T) {
	mech := aws.Auth{AccessKey: "AKID", SecretKey: "s"}.AsManagedStreamingIAMMechanism()
	for _, withTLS := range []bool{false, true} {
		h := &warnCounter{}
		opts := []Opt{BootstrapServers("127.0.0.1:1"), Logger(slog.New(h)), SASL(mech)}
		if withTLS {
			opts = append(opts, TLS(&tls.Config{}))
		}
		p, err := New(opts...)
		require.NoError(t, err)
		p.Close(context.Background())
		want := 1
		if withTLS {
			want = 0
		}
		assert.Equal(t, want, h.count("replay"), "TLS %v", withTLS)
	}
}

// warnCounter is a slog handler keeping the messages of warnings.
type warnCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (h *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.mu.Lock()
		h.msgs = append(h.msgs, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnCounter) WithGroup(string) slog.Handler      { return h }

// count returns how many warnings contain substr.
func (h *warnCounter) count(substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}
