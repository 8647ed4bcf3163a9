package producer

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// typedCase is one typed option with values its row accepts and refuses,
// as a Go value and as the property's text, and the field it sets.
type typedCase struct {
	option   string
	property string
	good     Opt    // a valid value,
	goodText string // the same as text
	bad      []Opt  // refused: below and above the row's range
	badText  []string
	field    func(*config) any
}

func durCase(option, property string, mk func(time.Duration) Opt, loMs int64, field func(*config) any) typedCase {
	lo := time.Duration(loMs) * time.Millisecond
	hi := time.Duration(math.MaxInt32) * time.Millisecond
	return typedCase{option, property, mk(lo + 7*time.Millisecond), strconv.FormatInt(loMs+7, 10),
		[]Opt{mk(lo - time.Microsecond), mk(hi + time.Microsecond), mk(time.Duration(math.MaxInt64))},
		[]string{strconv.FormatInt(loMs-1, 10), "2147483648", "9223372036854775807", "1.5", "5ms"}, field}
}

func intCase(option, property string, mk func(int64) Opt, lo, hi int64, field func(*config) any) typedCase {
	bad := []Opt{mk(lo - 1)}
	badText := []string{strconv.FormatInt(lo-1, 10), "x", "1e3"}
	if hi < math.MaxInt64 {
		bad = append(bad, mk(hi+1))
		badText = append(badText, strconv.FormatInt(hi+1, 10))
	}
	return typedCase{option, property, mk(lo + 7), strconv.FormatInt(lo+7, 10), bad, badText, field}
}

func typedCases() []typedCase {
	return []typedCase{
		intCase("MaxInFlightRequestsPerConnection", "max.in.flight.requests.per.connection", func(n int64) Opt { return MaxInFlightRequestsPerConnection(int(n)) }, 1, math.MaxInt32,
			func(c *config) any { return c.maxInFlightPerConn }),
		intCase("BatchSize", "batch.size", func(n int64) Opt { return BatchSize(int(n)) }, 0, math.MaxInt32, func(c *config) any { return c.batchSize }),
		durCase("Linger", "linger.ms", Linger, 0, func(c *config) any { return c.linger }),
		intCase("BufferMemory", "buffer.memory", BufferMemory, 1, math.MaxInt64, func(c *config) any { return c.bufferMemory }),
		intCase("MaxRequestSize", "max.request.size", func(n int64) Opt { return MaxRequestSize(int(n)) }, 62, math.MaxInt32, func(c *config) any { return c.maxRequestSize }),
		durCase("DeliveryTimeout", "delivery.timeout.ms", DeliveryTimeout, 1, func(c *config) any { return c.deliveryTimeout }),
		durCase("RequestTimeout", "request.timeout.ms", RequestTimeout, 1, func(c *config) any { return c.requestTimeout }),
		durCase("RetryBackoff", "retry.backoff.ms", RetryBackoff, 0, func(c *config) any { return c.retryBackoff }),
		durCase("RetryBackoffMax", "retry.backoff.max.ms", RetryBackoffMax, 0, func(c *config) any { return c.retryBackoffMax }),
		durCase("MetadataMaxAge", "metadata.max.age.ms", MetadataMaxAge, 1, func(c *config) any { return c.metadataMaxAge }),
		durCase("MetadataMaxIdle", "metadata.max.idle.ms", MetadataMaxIdle, 5000, func(c *config) any { return c.metadataMaxIdle }),
		durCase("MaxBlock", "max.block.ms", MaxBlock, 0, func(c *config) any { return c.maxBlock }),
		intCase("MaxWindow", "longhaul.max.window", func(n int64) Opt { return MaxWindow(int(n)) }, 0, math.MaxInt32, func(c *config) any { return c.windowCap }),
		durCase("IdleRearm", "longhaul.idle.rearm.ms", IdleRearm, 0, func(c *config) any { return c.idleRearm }),
	}
}

// TestTypedOptionsShareTheRowsCheck: every typed option sets the same
// value as its property's text, and every row's validator refuses the same
// range from both paths: from the option with a ConfigError naming the
// option, the property and the Go value, in the option's units; from the
// text with one naming the property, in the property's units.
func TestTypedOptionsShareTheRowsCheck(t *testing.T) {
	for _, tc := range typedCases() {
		t.Run(tc.option, func(t *testing.T) {
			byOpt, byText := defaultConfig(), defaultConfig()
			require.NoError(t, tc.good.apply(&byOpt))
			require.NoError(t, byText.setProperty(tc.property, tc.goodText))
			assert.Equal(t, tc.field(&byText), tc.field(&byOpt))
			assert.NotEqual(t, tc.field(&byText), func() any { c := defaultConfig(); return tc.field(&c) }(), "the good value is not the default")

			for _, o := range tc.bad {
				c := defaultConfig()
				err := o.apply(&c)
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.property, ce.Property)
				assert.Equal(t, tc.option, ce.Option)
				assert.Contains(t, ce.Reason, "must be between")
				assert.NotContains(t, ce.Reason, "integer", "an option's reason is in its own units")
				assert.Contains(t, err.Error(), tc.option+"("+ce.Value+")")
				assert.ErrorIs(t, err, ErrInvalidConfig)
			}
			for _, v := range tc.badText {
				c := defaultConfig()
				err := c.setProperty(tc.property, v)
				var ce *ConfigError
				require.ErrorAs(t, err, &ce, v)
				assert.Equal(t, tc.property, ce.Property, v)
				assert.Empty(t, ce.Option, v)
				assert.Equal(t, v, ce.Value)
				assert.Contains(t, ce.Reason, "must be an integer", v)
			}
		})
	}
}

// TestTypedOptionsCoverTheTypedRows: the cases above cover every typed
// option; the table's only typed row without one is
// longhaul.coalesce.requests, reached through Property.
func TestTypedOptionsCoverTheTypedRows(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range typedCases() {
		seen[tc.property] = true
	}
	for _, r := range []*typedValue[int64]{maxInFlightValue, batchSizeValue, bufferMemoryValue, maxRequestSizeValue, maxWindowValue, coalesceValue} {
		assert.True(t, seen[r.name] || r.name == "longhaul.coalesce.requests", r.name)
	}
	for _, r := range []*typedValue[time.Duration]{lingerValue, deliveryTimeoutValue, requestTimeoutValue, retryBackoffValue,
		retryBackoffMaxValue, metadataMaxAgeValue, metadataMaxIdleValue, maxBlockValue, idleRearmValue} {
		assert.True(t, seen[r.name], r.name)
	}
	c := defaultConfig()
	require.NoError(t, Property("longhaul.coalesce.requests", "9").apply(&c))
	assert.Equal(t, 9, c.coalesce)
	err := Property("longhaul.coalesce.requests", "-1").apply(&c)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "must be an integer between 0 and 2147483647", ce.Reason)
}

// TestDurationOptionsKeepSubMillisecond: a typed duration is kept as
// given: Linger(1500*time.Microsecond) lingers 1.5 ms, where the text
// linger.ms holds whole milliseconds ("1.5" is refused). Below a row's
// lower bound by a microsecond is refused, not rounded into the range.
func TestDurationOptionsKeepSubMillisecond(t *testing.T) {
	c, err := configFrom(map[string]string{"bootstrap.servers": "h:1"}, Linger(1500*time.Microsecond), RequestTimeout(2500*time.Microsecond))
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Microsecond, c.linger)
	assert.Equal(t, 2500*time.Microsecond, c.requestTimeout)

	_, err = configFrom(map[string]string{"bootstrap.servers": "h:1", "linger.ms": "1.5"})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "linger.ms", ce.Property)

	_, err = configFrom(map[string]string{"bootstrap.servers": "h:1"}, DeliveryTimeout(999*time.Microsecond))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "producer: invalid DeliveryTimeout(999µs): delivery.timeout.ms must be between 1ms and 596h31m23.647s", err.Error())
}

// TestTextOptionErrorsNameTheOption: options whose value is text
// (BootstrapServers, Compression) name themselves and the value as
// written; Property names only the property, as NewFromProperties does.
func TestTextOptionErrorsNameTheOption(t *testing.T) {
	c := defaultConfig()
	err := BootstrapServers("h:1", "nohost").apply(&c)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "bootstrap.servers", ce.Property)
	assert.Equal(t, "BootstrapServers", ce.Option)
	assert.Equal(t, `"h:1", "nohost"`, ce.Value)
	assert.Contains(t, err.Error(), `invalid BootstrapServers("h:1", "nohost"): bootstrap.servers want host:port entries`)

	err = Compression("brotli").apply(&c)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "producer: invalid Compression(\"brotli\"): compression.type must be one of none, gzip, snappy, lz4, zstd", err.Error())

	err = Property("compression.type", "brotli").apply(&c)
	require.ErrorAs(t, err, &ce)
	assert.Empty(t, ce.Option)
	assert.Equal(t, `producer: invalid compression.type="brotli": must be one of none, gzip, snappy, lz4, zstd`, err.Error())
}

// FuzzTypedOptionAgreesWithText: for any whole number n, each typed row
// accepts n (as milliseconds for a duration) from its option exactly when
// it accepts strconv.Itoa(n) as text, and both set the same value.
func FuzzTypedOptionAgreesWithText(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 61, 62, 4999, 5000, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MaxInt64, math.MinInt64} {
		f.Add(n)
	}
	ints := []*typedValue[int64]{maxInFlightValue, batchSizeValue, bufferMemoryValue, maxRequestSizeValue, maxWindowValue, coalesceValue}
	durs := []*typedValue[time.Duration]{lingerValue, deliveryTimeoutValue, requestTimeoutValue, retryBackoffValue,
		retryBackoffMaxValue, metadataMaxAgeValue, metadataMaxIdleValue, maxBlockValue, idleRearmValue}
	f.Fuzz(func(t *testing.T, n int64) {
		text := strconv.FormatInt(n, 10)
		for _, r := range ints {
			a, b := defaultConfig(), defaultConfig()
			errOpt, errText := r.option("X", n).apply(&a), r.setText(&b, text)
			require.Equal(t, errOpt == nil, errText == nil, "%s %d: option %v, text %v", r.name, n, errOpt, errText)
			a.rand, b.rand = randSources{}, randSources{} // seeded at random
			require.Equal(t, b, a, "%s %d", r.name, n)
		}
		if n < math.MinInt64/int64(time.Millisecond) || n > math.MaxInt64/int64(time.Millisecond) {
			return // not a time.Duration of whole milliseconds
		}
		for _, r := range durs {
			a, b := defaultConfig(), defaultConfig()
			errOpt, errText := r.option("X", time.Duration(n)*time.Millisecond).apply(&a), r.setText(&b, text)
			require.Equal(t, errOpt == nil, errText == nil, "%s %d: option %v, text %v", r.name, n, errOpt, errText)
			a.rand, b.rand = randSources{}, randSources{} // seeded at random
			require.Equal(t, b, a, "%s %d", r.name, n)
		}
	})
}
