package producer

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configFrom builds the config NewFromProperties would, without a producer.
func configFrom(props map[string]string, opts ...Opt) (config, error) {
	c := defaultConfig()
	for _, name := range sortedKeys(props) {
		if err := c.setProperty(name, props[name]); err != nil {
			return c, err
		}
	}
	for _, o := range opts {
		if err := o.apply(&c); err != nil {
			return c, err
		}
	}
	return c, c.validate()
}

// logRecorder is a slog handler keeping each record's level, message and
// property attribute.
type logRecorder struct {
	mu   sync.Mutex
	recs []loggedProperty
}

type loggedProperty struct {
	level    slog.Level
	msg      string
	property string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	lp := loggedProperty{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "property" {
			lp.property = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, lp)
	h.mu.Unlock()
	return nil
}

// levelOf returns the level property was logged at, and whether it was.
func (h *logRecorder) levelOf(property string) (slog.Level, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.property == property {
			return r.level, true
		}
	}
	return 0, false
}

// Confluent Cloud's Java client snippet, as its console gives it (single
// quotes in the JAAS line, librdkafka's sasl.mechanisms next to Java's,
// and a consumer setting shared with the consumer).
func confluentCloudSnippet() map[string]string {
	return map[string]string{
		"bootstrap.servers":  "pkc-abc12.us-east-1.aws.confluent.cloud:9092",
		"security.protocol":  "SASL_SSL",
		"sasl.mechanisms":    "PLAIN",
		"sasl.mechanism":     "PLAIN",
		"sasl.jaas.config":   "org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY123' password='s3cr/et+';",
		"client.dns.lookup":  "use_all_dns_ips",
		"session.timeout.ms": "45000",
		"acks":               "all",
		// Its Schema Registry block, often pasted along.
		"schema.registry.url":           "https://psrc-xyz.us-east-2.aws.confluent.cloud",
		"basic.auth.credentials.source": "USER_INFO",
		"basic.auth.user.info":          "SRKEY:SRSECRET",
		"key.serializer":                "org.apache.kafka.common.serialization.StringSerializer",
		"value.serializer":              "io.confluent.kafka.serializers.KafkaAvroSerializer",
	}
}

func TestJavaConfConfluentCloudSnippetParses(t *testing.T) {
	h := &logRecorder{}
	c, err := configFrom(confluentCloudSnippet(), Logger(slog.New(h)))
	require.NoError(t, err)
	require.NotNil(t, c.sasl)
	assert.Equal(t, "PLAIN", c.sasl.Name())
	assert.Equal(t, "KEY123", c.jaas["username"])
	assert.Equal(t, "s3cr/et+", c.jaas["password"])
	require.NotNil(t, c.tls, "SASL_SSL uses TLS")

	// And a producer is built from it (New does not connect).
	p, err := NewFromProperties(confluentCloudSnippet())
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))
}

// AWS MSK's SASL/SCRAM client properties (IAM-less), as its docs give them.
func TestJavaConfMSKScramSnippetParses(t *testing.T) {
	c, err := configFrom(map[string]string{
		"bootstrap.servers":                     "b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9096,b-2.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9096",
		"security.protocol":                     "SASL_SSL",
		"sasl.mechanism":                        "SCRAM-SHA-512",
		"sasl.jaas.config":                      `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`,
		"client.dns.lookup":                     "use_all_dns_ips",
		"ssl.protocol":                          "TLSv1.2",
		"enable.idempotence":                    "true",
		"max.in.flight.requests.per.connection": "5",
		"retries":                               "2147483647",
		"metric.reporters":                      "",
		"reconnect.backoff.ms":                  "1000",
	})
	require.NoError(t, err)
	require.NotNil(t, c.sasl)
	assert.Equal(t, "SCRAM-SHA-512", c.sasl.Name())
	assert.Len(t, c.bootstrap, 2)
}

// Aiven's Java producer properties for SASL (SCRAM-SHA-256 over TLS with
// the project CA as a PEM file), with its empty host name check and the
// consumer settings of its shared example.
func TestJavaConfAivenSnippetParses(t *testing.T) {
	k := newPKI(t)
	ca := k.write(t, "ca.pem", k.ca.CertPEM())
	c, err := configFrom(map[string]string{
		"bootstrap.servers":                     "kafka-1234-project.aivencloud.com:12345",
		"security.protocol":                     "SASL_SSL",
		"sasl.mechanism":                        "SCRAM-SHA-256",
		"sasl.jaas.config":                      `org.apache.kafka.common.security.scram.ScramLoginModule required username="avnadmin" password="pw";`,
		"ssl.truststore.type":                   "PEM",
		"ssl.truststore.location":               ca,
		"ssl.endpoint.identification.algorithm": "",
		"group.id":                              "demo-group",
		"auto.offset.reset":                     "earliest",
		"key.serializer":                        "org.apache.kafka.common.serialization.StringSerializer",
		"value.serializer":                      "org.apache.kafka.common.serialization.StringSerializer",
	})
	require.NoError(t, err)
	require.NotNil(t, c.sasl)
	assert.Equal(t, "SCRAM-SHA-256", c.sasl.Name())
	require.NotNil(t, c.tls)
	assert.NotNil(t, c.tls.RootCAs, "the CA file is the trust store")
}

// comparable strips what differs between two configs built from the same
// settings (random sources) and the record of ignored names.
func comparable(c config) config {
	c.rand = randSources{}
	c.ignoredGiven = nil
	c.aliasGiven = nil
	return c
}

// TestJavaConfIgnoredHaveNoEffect: every ignored property, given with a
// value, leaves the config as it was without it. Its negative control: a
// property that is read (linger.ms) does change it, so the comparison can
// fail.
func TestJavaConfIgnoredHaveNoEffect(t *testing.T) {
	base := map[string]string{"bootstrap.servers": "127.0.0.1:9092"}
	want, err := configFrom(base)
	require.NoError(t, err)
	for name := range ignoredProperties {
		for _, v := range []string{"1", "x", ""} {
			props := map[string]string{"bootstrap.servers": "127.0.0.1:9092", name: v}
			got, err := configFrom(props)
			require.NoError(t, err, name)
			assert.Equal(t, []string{name}, got.ignoredGiven, "%s is recorded as ignored", name)
			require.Equal(t, comparable(want), comparable(got), "%s=%q changed the config", name, v)
		}
	}
	got, err := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "linger.ms": "7"})
	require.NoError(t, err)
	require.NotEqual(t, comparable(want), comparable(got), "negative control: a property that is read changes the config")
}

// TestJavaConfIgnoredLogged: a consumer, admin or serializer property is
// logged at Warn, a Java producer property without effect at Debug; each
// once per producer, through the Logger option.
func TestJavaConfIgnoredLogged(t *testing.T) {
	h := &logRecorder{}
	p, err := NewFromProperties(confluentCloudSnippet(), Logger(slog.New(h)))
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))
	for _, name := range sortedKeys(confluentCloudSnippet()) {
		reason, notProducer, ok := IgnoredProperty(name)
		if !ok {
			_, logged := h.levelOf(name)
			assert.False(t, logged, "%s is read, not ignored: nothing logged", name)
			continue
		}
		require.NotEmpty(t, reason)
		level, logged := h.levelOf(name)
		require.True(t, logged, "%s ignored without a log", name)
		if notProducer {
			assert.Equal(t, slog.LevelWarn, level, name)
		} else {
			assert.Equal(t, slog.LevelDebug, level, name)
		}
	}
	warns := 0
	for _, r := range h.recs {
		if r.property == "session.timeout.ms" {
			warns++
		}
	}
	assert.Equal(t, 1, warns, "logged once")
	_, notProducer, _ := IgnoredProperty("session.timeout.ms")
	assert.True(t, notProducer)
	_, notProducer, _ = IgnoredProperty("client.dns.lookup")
	assert.False(t, notProducer)
}

func TestJavaConfIgnoredPropertyAccessor(t *testing.T) {
	_, _, ok := IgnoredProperty("linger.ms")
	assert.False(t, ok, "a property that is read is not ignored")
	_, _, ok = IgnoredProperty("interceptor.classes")
	assert.False(t, ok, "an unsupported property is not ignored")
	_, _, ok = IgnoredProperty("no.such.property")
	assert.False(t, ok)
	reason, notProducer, ok := IgnoredProperty("group.id")
	require.True(t, ok)
	assert.True(t, notProducer)
	assert.Contains(t, reason, "consumer")
	// Ignored names are not listed by PropertyNames.
	names := PropertyNames()
	for name := range ignoredProperties {
		assert.NotContains(t, names, name)
	}
}

// TestJavaConfUnsupported: each unsupported property is accepted at its
// Java default and rejected otherwise, with a reason saying what to do.
func TestJavaConfUnsupported(t *testing.T) {
	cases := []struct {
		name, def, bad, wantReason string
	}{
		{"transaction.two.phase.commit.enable", "false", "true", "InitProducerId v6"},
		{"interceptor.classes", "", "com.example.Audit", "Hooks option"},
		{"security.providers", "", "com.example.Provider", "TLS option"},
		{"config.providers", "", "file", "resolve them"},
		{"ssl.provider", "", "SunJSSE", "TLS option"},
		{"ssl.cipher.suites", "", "TLS_AES_128_GCM_SHA256", "CipherSuites"},
		{"ssl.engine.factory.class", "", "com.example.Factory", "TLS option"},
		{"sasl.login.class", "", "com.example.Login", "SASL option"},
		{"sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler", "com.example.Handler", "SASL option"},
		{"sasl.oauthbearer.header.urlencode", "false", "true", "remove the property"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.name] = true
		props := map[string]string{"bootstrap.servers": "127.0.0.1:9092"}
		props[tc.name] = tc.def
		got, err := configFrom(props)
		require.NoError(t, err, "%s=%q is Java's default", tc.name, tc.def)
		want, _ := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092"})
		require.Equal(t, comparable(want), comparable(got), "%s at its default has no effect", tc.name)
		props[tc.name] = tc.bad
		_, err = configFrom(props)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		assert.Equal(t, tc.name, ce.Property)
		assert.Equal(t, tc.bad, ce.Value)
		assert.Contains(t, ce.Reason, tc.wantReason)
		assert.True(t, errors.Is(err, ErrInvalidConfig))
	}
	for name := range unsupportedProperties {
		assert.True(t, seen[name], "%s has no case here", name)
	}
	// An empty transactional.id is rejected (Java rejects it as well).
	_, err := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transactional.id": ""})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "transactional.id", ce.Property)
	require.Contains(t, ce.Reason, "must not be empty")
}

// TestJavaConfTypoSuggests: a name no table knows is a ConfigError naming
// the closest known name when it is a likely typo, and never the whole
// list of names.
func TestJavaConfTypoSuggests(t *testing.T) {
	cases := map[string]string{
		"linger.msx":                           "linger.ms",
		"bootstrap.server":                     "bootstrap.servers",
		"Linger.ms":                            "linger.ms",
		"sasl.jass.config":                     "sasl.jaas.config",
		"sesion.timeout.ms":                    "session.timeout.ms",
		"compresion.type":                      "compression.type",
		"max.inflight.requests.per.connection": "max.in.flight.requests.per.connection",
	}
	for typo, want := range cases {
		_, err := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", typo: "1"})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, typo)
		assert.Equal(t, typo, ce.Property)
		assert.Equal(t, "unknown property; did you mean "+want+"?", ce.Reason, typo)
	}
	for _, far := range []string{"foo", "my.own.setting", "longhaul.turbo"} {
		_, err := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", far: "1"})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, far)
		assert.NotContains(t, ce.Reason, "did you mean", far)
		assert.Contains(t, ce.Reason, "PropertyNames", far)
		assert.NotContains(t, ce.Reason, "batch.size", "%s: not the whole list", far)
	}
}

func TestJavaConfEditDistance(t *testing.T) {
	assert.Equal(t, 0, editDistance("abc", "abc"))
	assert.Equal(t, 1, editDistance("abc", "abd"))
	assert.Equal(t, 1, editDistance("abc", "ab"))
	assert.Equal(t, 1, editDistance("abc", "abxc"))
	assert.Equal(t, 3, editDistance("", "abc"))
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
}

// TestJavaConfSaslMechanismsAlias: librdkafka's sasl.mechanisms is read as
// sasl.mechanism; both spellings with one value are fine, with two values
// a ConfigError, in either order of application.
func TestJavaConfSaslMechanismsAlias(t *testing.T) {
	base := func() map[string]string {
		return map[string]string{
			"bootstrap.servers": "127.0.0.1:9092",
			"security.protocol": "SASL_PLAINTEXT",
			"sasl.jaas.config":  `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`,
		}
	}
	props := base()
	props["sasl.mechanisms"] = "SCRAM-SHA-256"
	c, err := configFrom(props)
	require.NoError(t, err)
	assert.Equal(t, "SCRAM-SHA-256", c.sasl.Name(), "the alias is read")

	props["sasl.mechanism"] = "scram-sha-256"
	c, err = configFrom(props)
	require.NoError(t, err, "same value, any case")
	assert.Equal(t, "SCRAM-SHA-256", c.sasl.Name())

	props["sasl.mechanism"] = "PLAIN"
	_, err = configFrom(props)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Reason, "conflicts with")

	// The other order, in one map: sasl.mechanism sorts first.
	_, err = configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-512"})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sasl.mechanisms", ce.Property)

	// An option overrides either spelling, as a later option overrides an
	// earlier one.
	props = base()
	props["sasl.mechanisms"] = "PLAIN"
	c, err = configFrom(props, Property("sasl.mechanism", "SCRAM-SHA-512"))
	require.NoError(t, err)
	assert.Equal(t, "SCRAM-SHA-512", c.sasl.Name())
	props = base()
	props["sasl.mechanism"] = "PLAIN"
	c, err = configFrom(props, Property("sasl.mechanisms", "SCRAM-SHA-256"))
	require.NoError(t, err)
	assert.Equal(t, "SCRAM-SHA-256", c.sasl.Name())
}

// javaProducerProperties is every property Apache Kafka's ProducerConfig
// defines (with CommonClientConfigs, SslConfigs' client support and
// SaslConfigs' client support), as of Kafka 4.1.
var javaProducerProperties = strings.Fields(`
bootstrap.servers client.dns.lookup buffer.memory retries acks compression.type
compression.gzip.level compression.lz4.level compression.zstd.level batch.size
partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
partitioner.ignore.keys linger.ms delivery.timeout.ms client.id send.buffer.bytes
receive.buffer.bytes max.request.size reconnect.backoff.ms reconnect.backoff.max.ms
retry.backoff.ms retry.backoff.max.ms enable.metrics.push max.block.ms
request.timeout.ms metadata.max.age.ms metadata.max.idle.ms metrics.sample.window.ms
metrics.num.samples metrics.recording.level metric.reporters
max.in.flight.requests.per.connection key.serializer value.serializer
socket.connection.setup.timeout.ms socket.connection.setup.timeout.max.ms
connections.max.idle.ms partitioner.class interceptor.classes security.protocol
security.providers enable.idempotence transaction.timeout.ms transactional.id
transaction.two.phase.commit.enable metadata.recovery.strategy
metadata.recovery.rebootstrap.trigger.ms config.providers
ssl.protocol ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keystore.type
ssl.keystore.location ssl.keystore.password ssl.key.password ssl.keystore.key
ssl.keystore.certificate.chain ssl.truststore.certificates ssl.truststore.type
ssl.truststore.location ssl.truststore.password ssl.keymanager.algorithm
ssl.trustmanager.algorithm ssl.endpoint.identification.algorithm
ssl.secure.random.implementation ssl.engine.factory.class
sasl.kerberos.service.name sasl.kerberos.kinit.cmd sasl.kerberos.ticket.renew.window.factor
sasl.kerberos.ticket.renew.jitter sasl.kerberos.min.time.before.relogin
sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds sasl.mechanism
sasl.jaas.config sasl.client.callback.handler.class sasl.login.callback.handler.class
sasl.login.class sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.clock.skew.seconds
sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.header.urlencode`)

// TestJavaConfEveryJavaPropertyClassified: each Java producer property is
// read, ignored or unsupported (never "unknown"), and each name is in one
// table only, so no property is both ignored and read.
func TestJavaConfEveryJavaPropertyClassified(t *testing.T) {
	for _, name := range javaProducerProperties {
		n := 0
		if lookupProperty(name) != nil {
			n++
		}
		if _, ok := ignoredProperties[name]; ok {
			n++
		}
		if _, ok := unsupportedProperties[name]; ok {
			n++
		}
		assert.Equal(t, 1, n, "%s: in %d tables", name, n)
	}
	for name := range ignoredProperties {
		assert.Nil(t, lookupProperty(name), name)
		_, both := unsupportedProperties[name]
		assert.False(t, both, name)
	}
	for name := range unsupportedProperties {
		assert.Nil(t, lookupProperty(name), name)
	}
}
