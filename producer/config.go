package producer

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/longhaul-kafka/longhaul/internal/keystore"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// config is the producer's whole configuration. Every field that has a
// Kafka property is written only through the properties table, so typed
// options and NewFromProperties cannot drift apart.
type config struct {
	bootstrap          []string
	clientID           string
	maxInFlightPerConn int
	batchSize          int
	linger             time.Duration
	bufferMemory       int64
	maxRequestSize     int
	deliveryTimeout    time.Duration
	deliveryTimeoutSet bool // delivery.timeout.ms was given, not defaulted (validate)
	requestTimeout     time.Duration
	retryBackoff       time.Duration
	retryBackoffMax    time.Duration
	compression        protocol.Codec
	compressionLevels  map[protocol.Codec]int // compression.<codec>.level
	compressionLevel   int                    // compression's level, set by validate
	metadataMaxAge     time.Duration
	maxBlock           time.Duration
	metadataMaxIdle    time.Duration
	rebootstrap        bool          // metadata.recovery.strategy=rebootstrap
	rebootstrapAfter   time.Duration // metadata.recovery.rebootstrap.trigger.ms
	autoCreateTopics   bool
	ignoreKeys         bool
	adaptive           bool
	availTimeout       time.Duration // partitioner.availability.timeout.ms; 0 = off
	clientRack         string        // client.rack
	rackAware          bool          // partitioner.rack.aware
	metricsPush        bool          // enable.metrics.push
	windowCap          int
	idleRearm          time.Duration
	coalesce           int           // longhaul.coalesce.requests
	readback           bool          // longhaul.readback.enable
	readbackMaxBytes   int64         // longhaul.readback.max.bytes
	readbackTimeout    time.Duration // longhaul.readback.timeout.ms
	transactionalID    string        // transactional.id; "" = not transactional
	txnIDGiven         bool          // transactional.id was given (validate refuses it empty)
	txnTimeout         time.Duration // transaction.timeout.ms
	securityProtocol   string
	saslMechanism      string
	jaas               map[string]string // sasl.jaas.config options
	oauthTokenURL      string
	ssl                keystore.Config

	// saslBuilders build the SASL mechanism named by sasl.mechanism, from
	// plugin modules (SASLFromProperties).
	saslBuilders map[string]func(SASLProperties) (sasl.Mechanism, error)

	tls    *tls.Config
	sasl   sasl.Mechanism
	logger *slog.Logger
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	hooks  hookSet // hooks.go

	// Partitioner (partitioners.go): the typed option's value, else the
	// one partitioner.class or partitioner names (nil = the default).
	partitioner      Partitioner
	partitionerClass func() Partitioner
	partitionerName  func() Partitioner

	// Java properties given that have no effect (javaconf.go), in the
	// order given, logged by validate; and the spelling each property was
	// given as, by its canonical name, to catch an alias's conflicting value.
	ignoredGiven []string
	aliasGiven   map[string]givenAs

	// rand are the producer's random sources (rand.go), seeded at
	// random; tests seed them with seededRandom.
	rand randSources

	// regress are the bugs a negative control brought back (regress.go);
	// empty in the default build.
	regress regressions
	// probe, set only by tests, counts the sender's work (senderProbe).
	probe *senderProbe
}

// property is one row of the configuration table: a Kafka property name,
// its default, what it means, and how a text value is checked and stored.
type property struct {
	name string
	def  string
	doc  string
	set  func(c *config, v string) error
}

// The typed rows of the table (config_typed.go): each is set by text
// through its row and by its typed option through the same check.
var (
	maxInFlightValue = intValue("max.in.flight.requests.per.connection", 1, math.MaxInt32, func(c *config, n int64) { c.maxInFlightPerConn = int(n) })
	// 0, as in Java, disables batching: one record per batch, as 1 does.
	batchSizeValue       = intValue("batch.size", 0, math.MaxInt32, func(c *config, n int64) { c.batchSize = max(int(n), 1) })
	lingerValue          = durationValue("linger.ms", 0, func(c *config, d time.Duration) { c.linger = d })
	bufferMemoryValue    = intValue("buffer.memory", 1, math.MaxInt64, func(c *config, n int64) { c.bufferMemory = n })
	maxRequestSizeValue  = intValue("max.request.size", protocol.RecordBatchOverhead+1, math.MaxInt32, func(c *config, n int64) { c.maxRequestSize = int(n) })
	deliveryTimeoutValue = durationValue("delivery.timeout.ms", 1, func(c *config, d time.Duration) { c.deliveryTimeout, c.deliveryTimeoutSet = d, true })
	requestTimeoutValue  = durationValue("request.timeout.ms", 1, func(c *config, d time.Duration) { c.requestTimeout = d })
	retryBackoffValue    = durationValue("retry.backoff.ms", 0, func(c *config, d time.Duration) { c.retryBackoff = d })
	retryBackoffMaxValue = durationValue("retry.backoff.max.ms", 0, func(c *config, d time.Duration) { c.retryBackoffMax = d })
	metadataMaxAgeValue  = durationValue("metadata.max.age.ms", 1, func(c *config, d time.Duration) { c.metadataMaxAge = d })
	metadataMaxIdleValue = durationValue("metadata.max.idle.ms", 5000, func(c *config, d time.Duration) { c.metadataMaxIdle = d })
	rebootstrapValue     = durationValue("metadata.recovery.rebootstrap.trigger.ms", 0, func(c *config, d time.Duration) { c.rebootstrapAfter = d })
	maxBlockValue        = durationValue("max.block.ms", 0, func(c *config, d time.Duration) { c.maxBlock = d })
	maxWindowValue       = intValue("longhaul.max.window", 0, math.MaxInt32, func(c *config, n int64) { c.windowCap = int(n) })
	coalesceValue        = intValue("longhaul.coalesce.requests", 0, math.MaxInt32, func(c *config, n int64) { c.coalesce = int(n) })
	idleRearmValue       = durationValue("longhaul.idle.rearm.ms", 0, func(c *config, d time.Duration) { c.idleRearm = d })
	readbackBytesValue   = intValue("longhaul.readback.max.bytes", 1, math.MaxInt64, func(c *config, n int64) { c.readbackMaxBytes = n })
	readbackTimeoutValue = durationValue("longhaul.readback.timeout.ms", 1, func(c *config, d time.Duration) { c.readbackTimeout = d })
	// The coordinator refuses a timeout above its transaction.max.timeout.ms
	// (15 minutes by default) at InitTransactions.
	txnTimeoutValue   = durationValue("transaction.timeout.ms", 1, func(c *config, d time.Duration) { c.txnTimeout = d })
	availTimeoutValue = durationValue("partitioner.availability.timeout.ms", 0, func(c *config, d time.Duration) { c.availTimeout = d })
)

// properties is the single source of truth for names, defaults and checks.
var properties = append([]property{
	{"bootstrap.servers", "", "comma-separated host:port list of brokers to start from", func(c *config, v string) error {
		c.bootstrap = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(s); err != nil {
				return fmt.Errorf("want host:port entries: %v", err)
			}
			c.bootstrap = append(c.bootstrap, s)
		}
		return nil
	}},
	{"client.id", "longhaul", "client id sent to brokers", func(c *config, v string) error { c.clientID = v; return nil }},
	{"acks", "all", "only all (-1) is allowed: idempotence requires it", func(c *config, v string) error {
		if v != "all" && v != "-1" {
			return fmt.Errorf("must be all or -1: longhaul is an idempotent producer, and idempotence needs " +
				"every in-sync replica to have a batch before it is acknowledged (with acks=1 a leader change " +
				"can lose acknowledged records and the broker's sequence state); remove the property or set " +
				"acks=all. For acks=0 or 1 use a non-idempotent client such as franz-go's kgo or the Java producer")
		}
		return nil
	}},
	{"enable.idempotence", "true", "only true is allowed: longhaul is an idempotent producer", func(c *config, v string) error {
		if b, err := javaBool(v); err != nil || !b {
			return fmt.Errorf("must be true: longhaul is only an idempotent producer (exactly once and in order " +
				"per partition, with many batches in flight); remove the property or set it to true. For a " +
				"non-idempotent producer use franz-go's kgo or the Java producer")
		}
		return nil
	}},
	{"retries", "2147483647", "only the default is allowed: retries are bounded by delivery.timeout.ms", func(c *config, v string) error {
		if strings.TrimSpace(v) != "2147483647" {
			return fmt.Errorf("only the default, 2147483647, is allowed: longhaul retries until delivery.timeout.ms " +
				"runs out, as the Java producer does by default; a retry count would fail records that the next " +
				"attempt would have delivered (a leader change costs one), and with idempotence a failed batch " +
				"forces an epoch bump. Bound the time with delivery.timeout.ms instead")
		}
		return nil
	}},
	maxInFlightValue.row("5", "produce requests in flight per broker connection, at least 1; values above 5 are fine with idempotence (KIP-1269)"),
	batchSizeValue.row("16384", "target bytes per batch, per partition, its 61-byte header included (as Java counts)"),
	lingerValue.row("5", "how long a batch may wait for more records, in ms"),
	bufferMemoryValue.row("33554432", "bytes of records buffered before Produce blocks"),
	maxRequestSizeValue.row("1048576", "largest produce request, and so largest record, in bytes"),
	deliveryTimeoutValue.row("120000", "time from Produce to a final outcome, retries included, in ms; when not set, at least linger.ms + request.timeout.ms (as Java)"),
	requestTimeoutValue.row("30000", "how long to wait for one response, in ms"),
	retryBackoffValue.row("100", "first wait before a retry, in ms"),
	retryBackoffMaxValue.row("1000", "longest wait before a retry, in ms"),
	{"compression.type", "none", "none, gzip, snappy, lz4 or zstd", func(c *config, v string) error {
		codec, err := protocol.ParseCodec(v)
		if err != nil {
			return fmt.Errorf("must be one of none, gzip, snappy, lz4, zstd")
		}
		c.compression = codec
		return nil
	}},
	{"compression.gzip.level", "-1", "gzip level: 1 (fastest) to 9 (smallest), or -1 for the codec's default",
		levelSetter(protocol.CodecGzip, protocol.GzipLevelMin, protocol.GzipLevelMax, protocol.GzipLevelDefault)},
	{"compression.lz4.level", "9", "lz4 level: 1 to 17; 9, the default, is lz4's fast compressor, the others its high compressor (levels above 9 compress as 9)",
		levelSetter(protocol.CodecLz4, protocol.Lz4LevelMin, protocol.Lz4LevelMax, protocol.Lz4LevelDefault)},
	{"compression.zstd.level", "3", "zstd level: -131072 to 22 (in four steps here: below 3, 3-5, 6-9, 10 and up)",
		levelSetter(protocol.CodecZstd, protocol.ZstdLevelMin, protocol.ZstdLevelMax, protocol.ZstdLevelDefault)},
	metadataMaxAgeValue.row("300000", "metadata is refreshed at least this often, in ms"),
	metadataMaxIdleValue.row("300000", "a topic not produced to for this long, with nothing buffered, is left out of metadata requests, in ms"),
	{"metadata.recovery.strategy", "rebootstrap", "rebootstrap: when metadata requests have failed for metadata.recovery.rebootstrap.trigger.ms, or a broker answers REBOOTSTRAP_REQUIRED (KIP-1102), metadata is asked of bootstrap.servers alone, resolved again, until an answer names the brokers (KIP-899); none: REBOOTSTRAP_REQUIRED is a failed request, retried with backoff", func(c *config, v string) error {
		switch {
		case strings.EqualFold(v, "rebootstrap"):
			c.rebootstrap = true
		case strings.EqualFold(v, "none"):
			c.rebootstrap = false
		default:
			return fmt.Errorf("must be none or rebootstrap")
		}
		return nil
	}},
	rebootstrapValue.row("300000", "with metadata.recovery.strategy=rebootstrap: how long metadata requests fail (no broker known or in bootstrap.servers answers) before known brokers are left out of them, in ms"),
	maxBlockValue.row("60000", "how long a record may wait for its topic's metadata (partition list) before it fails, in ms"),
	{"allow.auto.create.topics", "true", "true: ask the broker to create a missing topic (its auto.create.topics.enable decides)", boolSetter(func(c *config, b bool) { c.autoCreateTopics = b })},
	{"partitioner.ignore.keys", "false", "true: sticky partitioning even for keyed records", boolSetter(func(c *config, b bool) { c.ignoreKeys = b })},
	{"partitioner.adaptive.partitioning.enable", "true", "true: records without a key go to partitions with less queued data (KIP-794)", boolSetter(func(c *config, b bool) { c.adaptive = b })},
	availTimeoutValue.row("0", "with partitioner.adaptive.partitioning.enable: records without a key skip a partition whose sealed batches have waited this long with none sent (its broker cannot take them), while others of the topic are available (KIP-794), in ms; 0 = never"),
	{"client.rack", "", "the rack this producer runs in, for partitioner.rack.aware (a broker's rack is its broker.rack)", func(c *config, v string) error { c.clientRack = v; return nil }},
	{"enable.metrics.push", "true", "true: push the producer's metrics to the cluster when a client-metrics subscription asks for them (KIP-714), as org.apache.kafka.producer.* OpenTelemetry metrics on a connection of their own", boolSetter(func(c *config, b bool) { c.metricsPush = b })},
	{"partitioner.rack.aware", "false", "true, with client.rack set: records without a key go to partitions whose leader is in client.rack when the topic has any (KIP-1123)", boolSetter(func(c *config, b bool) { c.rackAware = b })},
	maxWindowValue.row("0", "cap on batches in flight per partition below the broker's window; 0 = the broker's window"),
	coalesceValue.row("5", "while a broker queues our requests (its latest produce response took over twice the fastest answer on the connection), batches past linger.ms wait while this many produce requests are in flight to it, for at most that response's time, and go together in the next request once a response frees a slot; 0 = never"),
	{"transactional.id", "", "makes the producer transactional (InitTransactions, BeginTransaction, CommitTransaction); " +
		"the id names the producer across restarts: a new producer with the same id fences the old one; an empty id is refused: leave the property out for a producer without transactions",
		func(c *config, v string) error { c.transactionalID, c.txnIDGiven = v, true; return nil }},
	txnTimeoutValue.row("60000", "with transactional.id: how long a transaction may stay open before its coordinator aborts it, in ms; "+
		"at most the brokers' transaction.max.timeout.ms (15 minutes by default)"),
	idleRearmValue.row("300000", "after this long without an acknowledgement a partition sends one batch alone again (the broker may have expired our state); keep it below the brokers' producer.id.expiration.ms; 0 = never"),
	{"longhaul.readback.enable", "false", "true: a batch whose fate is unknown is settled by reading the partition back once a later batch is acknowledged under a bumped epoch (needs READ on the topic); its records' callbacks, and those after them in the partition, wait for the answer", boolSetter(func(c *config, b bool) { c.readback = b })},
	readbackBytesValue.row("67108864", "most bytes one read-back may fetch (every producer's batches between the last acknowledgement before the batch was sent and the fence) before its fate stays unknown"),
	readbackTimeoutValue.row("30000", "how long a batch of unknown fate may wait for its fence and read-back, at most delivery.timeout.ms, in ms; then its fate stays unknown"),
}, append(partitionerProperties, securityProperties...)...)

// boolSetter reads a boolean property (javaBool).
func boolSetter(store func(*config, bool)) func(*config, string) error {
	return func(c *config, v string) error {
		b, err := javaBool(v)
		if err != nil {
			return err
		}
		store(c, b)
		return nil
	}
}

// javaBool reads a boolean as the Java client's ConfigDef does: trimmed,
// true or false in any case, nothing else.
func javaBool(v string) (bool, error) {
	switch s := strings.TrimSpace(v); {
	case strings.EqualFold(s, "true"):
		return true, nil
	case strings.EqualFold(s, "false"):
		return false, nil
	}
	return false, fmt.Errorf("must be true or false")
}

// levelSetter checks a compression level against the Java client's range
// (lo..hi, or also def when def lies outside it, as gzip's -1 does).
func levelSetter(codec protocol.Codec, lo, hi, def int) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || (n != def && (n < lo || n > hi)) {
			if def < lo {
				return fmt.Errorf("must be an integer between %d and %d, or %d", lo, hi, def)
			}
			return fmt.Errorf("must be an integer between %d and %d", lo, hi)
		}
		if c.compressionLevels == nil {
			c.compressionLevels = map[protocol.Codec]int{}
		}
		c.compressionLevels[codec] = n
		return nil
	}
}

func lookupProperty(name string) *property {
	for i := range properties {
		if properties[i].name == name {
			return &properties[i]
		}
	}
	return nil
}

// setProperty checks and stores one property, naming it in the error. A
// name longhaul does not implement goes through the tables of javaconf.go.
func (c *config) setProperty(name, value string) error {
	canon := name
	if a, ok := propertyAliases[name]; ok {
		canon = a
	}
	if err := c.checkAlias(canon, name, value); err != nil {
		return err
	}
	given := name // the error names the spelling the user wrote
	name = canon
	if _, ok := ignoredProperties[name]; ok {
		c.ignoredGiven = append(c.ignoredGiven, name)
		return nil
	}
	if u, ok := unsupportedProperties[name]; ok {
		if u.ok(strings.TrimSpace(value)) {
			return nil
		}
		return &ConfigError{Property: name, Value: value, Reason: u.instead}
	}
	p := lookupProperty(name)
	if p == nil {
		return &ConfigError{Property: name, Value: value, Reason: unknownReason(name)}
	}
	// Trimmed, as the Java client's ConfigDef reads every value.
	if err := p.set(c, strings.TrimSpace(value)); err != nil {
		reason := err.Error()
		if given != name {
			reason += " (" + given + " is read as " + name + ")"
		}
		return &ConfigError{Property: given, Value: value, Reason: reason}
	}
	return nil
}

// checkAlias records that the property canon was given as name (canon or
// its alias) with value, and fails when the other spelling was given
// another value in the same properties map: one would silently lose. An
// option overrides instead (setOption), as a later option overrides an
// earlier one.
func (c *config) checkAlias(canon, name, value string) error {
	v := strings.TrimSpace(value)
	if prev, ok := c.aliasGiven[canon]; ok && prev.name != name && !strings.EqualFold(prev.value, v) {
		return &ConfigError{Property: name, Value: value,
			Reason: fmt.Sprintf("conflicts with %s=%q: they are the same property (librdkafka and Java spellings); give one", prev.name, prev.value)}
	}
	if c.aliasGiven == nil {
		c.aliasGiven = map[string]givenAs{}
	}
	c.aliasGiven[canon] = givenAs{name, v}
	return nil
}

// givenAs is the spelling and value a property was given as (checkAlias).
type givenAs struct{ name, value string }

// setOption sets a property from an option: it overrides whatever spelling
// the properties map or an earlier option gave.
func (c *config) setOption(name, value string) error {
	c.aliasGiven = nil
	return c.setProperty(name, value)
}

// defaultConfig holds every default, from the properties table.
func defaultConfig() config {
	c := config{rand: randomSources()}
	for _, p := range properties {
		if err := p.set(&c, p.def); err != nil {
			panic("producer: bad default for " + p.name + ": " + err.Error())
		}
	}
	c.deliveryTimeoutSet, c.txnIDGiven = false, false
	return c
}

// validate checks rules that span fields. Its errors name the property.
func (c *config) validate() error {
	if len(c.bootstrap) == 0 {
		return &ConfigError{Property: "bootstrap.servers", Reason: "required: at least one host:port"}
	}
	if c.deliveryTimeout < c.linger+c.requestTimeout && !c.deliveryTimeoutSet {
		// As the Java client does (configureDeliveryTimeout): a config
		// that raised request.timeout.ms or linger.ms past the default
		// keeps working; only an explicit value below the sum is an error.
		c.deliveryTimeout = c.linger + c.requestTimeout
	}
	if c.deliveryTimeout < c.linger+c.requestTimeout {
		return &ConfigError{Property: "delivery.timeout.ms", Value: strconv.FormatInt(c.deliveryTimeout.Milliseconds(), 10),
			Reason: fmt.Sprintf("must be at least linger.ms + request.timeout.ms (%d)", (c.linger + c.requestTimeout).Milliseconds())}
	}
	if c.txnIDGiven && c.transactionalID == "" {
		// Java refuses an empty id too: it would name every producer
		// that forgot to set one alike, and fence them all in turn.
		return &ConfigError{Property: "transactional.id", Reason: "must not be empty: remove the property for a producer without transactions"}
	}
	if err := c.applySecurity(); err != nil {
		return err
	}
	c.logIgnored()
	c.compressionLevel = c.compressionLevels[c.compression] // 0 (none, snappy): no level
	if err := c.resolvePartitioner(); err != nil {
		return err
	}
	if c.retryBackoffMax < c.retryBackoff {
		c.retryBackoffMax = c.retryBackoff // as the Java client does
	}
	// max.request.size may exceed buffer.memory, as in the Java client:
	// records larger than buffer.memory fail alone (produce).
	return nil
}

// PropertyNames returns the Kafka property names NewFromProperties accepts,
// sorted. Java-only properties that are accepted and ignored are not listed.
func PropertyNames() []string {
	names := make([]string, 0, len(properties))
	for _, p := range properties {
		names = append(names, p.name)
	}
	sort.Strings(names)
	return names
}

// PropertyDefault returns the default of a property and whether it exists.
func PropertyDefault(name string) (string, bool) {
	if p := lookupProperty(name); p != nil {
		return p.def, true
	}
	return "", false
}

// PropertyDoc returns the one-line description of a property.
func PropertyDoc(name string) string {
	if p := lookupProperty(name); p != nil {
		return p.doc
	}
	return ""
}
