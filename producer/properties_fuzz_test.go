package producer

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSetProperty feeds any value to every property name longhaul knows
// (read, ignored, unsupported, aliased) and any name: setProperty never
// panics; it fails only with a *ConfigError naming the property as given;
// a value accepted is accepted again with surrounding whitespace (values
// are trimmed, as in Java); and NewFromProperties and the Property option
// agree on whether a producer is built.
func FuzzSetProperty(f *testing.F) {
	names := knownNames()
	for i, n := range names {
		f.Add(uint16(i), "", n)
	}
	f.Add(uint16(0), "all", "")
	f.Add(uint16(1), " TRUE ", "")
	f.Add(uint16(2), "-1", "lingr.ms")
	f.Add(uint16(3), "9999999999999999999", "")
	f.Fuzz(func(t *testing.T, idx uint16, value, name string) {
		if name == "" {
			name = names[int(idx)%len(names)]
		}
		c := defaultConfig()
		err := c.setProperty(name, value)
		if err != nil {
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "%s=%q: %T %v", name, value, err, err)
			require.Equal(t, name, ce.Property, "%s=%q", name, value)
			require.NotEmpty(t, ce.Reason)
			return
		}
		padded := defaultConfig()
		require.NoError(t, padded.setProperty(name, " \t"+value+"\n "), "%s=%q accepted, padded not", name, value)
		props := map[string]string{"bootstrap.servers": "127.0.0.1:1", name: value}
		if name == "bootstrap.servers" {
			props[name] = value
		}
		p1, err1 := NewFromProperties(props)
		p2, err2 := New(BootstrapServers("127.0.0.1:1"), Property(name, value))
		if name == "bootstrap.servers" {
			p2, err2 = New(Property(name, value))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for _, p := range []*Producer{p1, p2} {
			if p != nil {
				p.Close(ctx)
			}
		}
		require.Equal(t, err1 == nil, err2 == nil, "%s=%q: NewFromProperties %v, Property %v", name, value, err1, err2)
	})
}

// TestAliasErrorNamesSpellingGiven: an invalid value given under an alias
// (librdkafka's sasl.mechanisms) is a ConfigError naming the spelling the
// user wrote, saying what it is read as; it named sasl.mechanism, a
// property the user never set.
func TestAliasErrorNamesSpellingGiven(t *testing.T) {
	_, err := NewFromProperties(map[string]string{"bootstrap.servers": "b:9092", "sasl.mechanisms": "GSSAPI"})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "sasl.mechanisms", ce.Property)
	require.Equal(t, "GSSAPI", ce.Value)
	require.Contains(t, ce.Reason, "sasl.mechanisms is read as sasl.mechanism")
}
