package producer

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
)

// Opt configures a Producer. Options are applied in order; a later option
// overrides an earlier one. An option that stands for a property is
// checked by that property's row of the table, as NewFromProperties checks
// the property; an invalid value is a [*ConfigError] naming the option
// and the property. Options taking a time.Duration keep it as given, below
// a millisecond too, where the *.ms property holds whole milliseconds.
type Opt interface {
	apply(*config) error
}

type optFunc func(*config) error

func (f optFunc) apply(c *config) error { return f(c) }

// propOpt is an option whose value is text: it writes through the
// property's row as NewFromProperties does. option names it in errors
// ("" for Property, which is the property path itself), shown is its
// value as the caller wrote it.
type propOpt struct{ name, value, option, shown string }

func (o propOpt) apply(c *config) error {
	err := c.setOption(o.name, o.value)
	if ce, ok := err.(*ConfigError); ok && o.option != "" {
		ce.Option, ce.Value = o.option, o.shown
		if ce.Value == "" {
			ce.Value = strconv.Quote(o.value)
		}
	}
	return err
}

// BootstrapServers sets bootstrap.servers: the brokers, as host:port, to
// learn the cluster from. Required.
func BootstrapServers(addrs ...string) Opt {
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = strconv.Quote(a)
	}
	return propOpt{name: "bootstrap.servers", value: strings.Join(addrs, ","), option: "BootstrapServers", shown: strings.Join(quoted, ", ")}
}

// ClientID sets client.id, sent with every request. Default "longhaul".
func ClientID(id string) Opt { return propOpt{name: "client.id", value: id, option: "ClientID"} }

// MaxInFlightRequestsPerConnection sets max.in.flight.requests.per.connection:
// produce requests in flight per broker connection. Default 5, at least 1,
// no upper bound: with KIP-1269 more than 5 is safe.
func MaxInFlightRequestsPerConnection(n int) Opt {
	return maxInFlightValue.option("MaxInFlightRequestsPerConnection", int64(n))
}

// BatchSize sets batch.size: the target size of one partition's batch, in
// bytes, its 61-byte RecordBatch header included, as the Java client and
// kgo count it, so a batch.size no larger than the topic's max.message.bytes
// gives batches the broker accepts. A topic whose max.message.bytes is
// smaller gets smaller batches once it refused one as too large: the
// refused batch is split, and the topic's later batches are built to fit
// the limit learned from its answers (topic configs are not read, which
// would need DESCRIBE_CONFIGS). A record larger than that goes in a
// batch of its own; 0, as in the Java client, puts every record in a batch
// of its own. Default 16384.
func BatchSize(bytes int) Opt { return batchSizeValue.option("BatchSize", int64(bytes)) }

// Linger sets linger.ms: how long a batch that is not full waits for more
// records. Default 5ms. d is kept as given: Linger(1500*time.Microsecond)
// waits 1.5 ms, where linger.ms as a property is whole milliseconds.
func Linger(d time.Duration) Opt { return lingerValue.option("Linger", d) }

// BufferMemory sets buffer.memory: the bytes of records the producer holds
// before Produce blocks. Default 33554432 (32 MiB).
func BufferMemory(bytes int64) Opt { return bufferMemoryValue.option("BufferMemory", bytes) }

// MaxRequestSize sets max.request.size: the largest produce request, and so
// the largest record, in bytes. Default 1048576.
func MaxRequestSize(bytes int) Opt { return maxRequestSizeValue.option("MaxRequestSize", int64(bytes)) }

// DeliveryTimeout sets delivery.timeout.ms: the time from Produce to a final
// outcome, retries included. Default 120s, or linger.ms + request.timeout.ms
// when that is more, as in the Java client; set below that sum it is a
// ConfigError.
func DeliveryTimeout(d time.Duration) Opt { return deliveryTimeoutValue.option("DeliveryTimeout", d) }

// RequestTimeout sets request.timeout.ms: how long to wait for one response
// before the connection is closed and the request retried. Default 30s.
func RequestTimeout(d time.Duration) Opt { return requestTimeoutValue.option("RequestTimeout", d) }

// TransactionalID sets transactional.id and makes the producer
// transactional: records are written only inside transactions
// ([Producer.BeginTransaction], [Producer.CommitTransaction]). The id names
// the producer across restarts: a producer that initializes with the same
// id fences this one ([ErrProducerFenced]) and aborts its open transaction.
// An empty id is a [*ConfigError].
func TransactionalID(id string) Opt {
	if id == "" {
		return optFunc(func(*config) error {
			return &ConfigError{Property: "transactional.id", Option: "TransactionalID", Value: `""`,
				Reason: "must not be empty: leave the option out for a producer without transactions"}
		})
	}
	return propOpt{name: "transactional.id", value: id, option: "TransactionalID"}
}

// TransactionTimeout sets transaction.timeout.ms: how long a transaction
// may stay open before its coordinator aborts it. Default 60s; between 1ms
// and math.MaxInt32 milliseconds, else a [*ConfigError]. The coordinator
// refuses more than its transaction.max.timeout.ms (15 minutes by default):
// [Producer.InitTransactions] then fails with [ErrTransactionFatal].
func TransactionTimeout(d time.Duration) Opt { return txnTimeoutValue.option("TransactionTimeout", d) }

// RetryBackoff sets retry.backoff.ms, the first wait before a retry.
// Default 100ms; it doubles up to RetryBackoffMax.
func RetryBackoff(d time.Duration) Opt { return retryBackoffValue.option("RetryBackoff", d) }

// RetryBackoffMax sets retry.backoff.max.ms. Default 1s.
func RetryBackoffMax(d time.Duration) Opt { return retryBackoffMaxValue.option("RetryBackoffMax", d) }

// Compression sets compression.type: none, gzip, snappy, lz4 or zstd.
// Default none. The level is a property, as in the Java client:
// Property("compression.zstd.level", "6"), and likewise
// compression.gzip.level and compression.lz4.level.
func Compression(codec string) Opt {
	return propOpt{name: "compression.type", value: codec, option: "Compression"}
}

// MetadataMaxAge sets metadata.max.age.ms. Default 5 minutes.
func MetadataMaxAge(d time.Duration) Opt { return metadataMaxAgeValue.option("MetadataMaxAge", d) }

// MetadataMaxIdle sets metadata.max.idle.ms: a topic not produced to for d,
// with nothing buffered or in flight, is no longer asked for in metadata
// requests, so a mistyped or deleted topic is not polled for the life of
// the producer. Its sequence numbers are kept, so producing to it again
// needs no epoch bump. Default 5 minutes, at least 5 s, as in the Java
// client.
func MetadataMaxIdle(d time.Duration) Opt { return metadataMaxIdleValue.option("MetadataMaxIdle", d) }

// MaxBlock sets max.block.ms: how long a record may wait for its topic's
// partition list (the first Metadata answer naming the topic) before it
// fails with [ErrTopicMetadata]. Default 60s, as in the Java client. It does
// not bound Produce's wait for buffer.memory: Produce's context does.
func MaxBlock(d time.Duration) Opt { return maxBlockValue.option("MaxBlock", d) }

// MaxWindow sets longhaul.max.window: a cap on batches in flight per
// partition below what the broker announces. Default 0, no cap. Setting 5
// makes the producer behave like clients without KIP-1269.
func MaxWindow(n int) Opt { return maxWindowValue.option("MaxWindow", int64(n)) }

// IdleRearm sets longhaul.idle.rearm.ms: after d without an
// acknowledgement, a partition's next batch goes alone until acknowledged,
// in case the broker expired the producer's state meanwhile (KIP-854,
// producer.id.expiration.ms, default 24 hours). Default 5 minutes; 0 turns
// the idle re-arm off. With it off or too long, a broker that lost the
// state makes the producer fail batches with [ErrOrderLost] rather than
// reorder them.
func IdleRearm(d time.Duration) Opt { return idleRearmValue.option("IdleRearm", d) }

// ReadBack sets longhaul.readback.enable: when on, a batch whose fate is
// unknown (it may or may not be in the log) is not called back at once;
// the producer settles it by reading the partition back (see
// [ErrNotWritten] and [ErrWrittenTwice]). It needs READ on the topic.
// Default false (off). It has no effect on a transactional producer,
// whose records of unknown fate make the transaction abortable instead.
func ReadBack(on bool) Opt {
	return propOpt{name: "longhaul.readback.enable", value: strconv.FormatBool(on), option: "ReadBack"}
}

// ReadBackMaxBytes sets longhaul.readback.max.bytes: the most record bytes
// one batch's read-back may fetch before its fate stays unknown
// ([ErrReadbackBudget]). Default 67108864 (64 MiB).
func ReadBackMaxBytes(n int64) Opt { return readbackBytesValue.option("ReadBackMaxBytes", n) }

// ReadBackTimeout sets longhaul.readback.timeout.ms: how long a batch of
// unknown fate may wait for its fence and its read-back (at most
// delivery.timeout.ms) before it is called back with its fate unknown
// ([ErrReadbackNoFence], [ErrReadbackBudget]). Meanwhile the later records
// of its partition wait too, to keep callback order. Default 30s.
func ReadBackTimeout(d time.Duration) Opt { return readbackTimeoutValue.option("ReadBackTimeout", d) }

// Property sets one Kafka property by name, as NewFromProperties does.
func Property(name, value string) Opt { return propOpt{name: name, value: value} }

// TLS makes every connection use TLS with a copy of cfg taken when the
// option is applied, so later changes to cfg do not reach the producer;
// an empty ServerName verifies each broker's own host name. Default: plain
// TCP.
func TLS(cfg *tls.Config) Opt {
	return optFunc(func(c *config) error { c.tls = cfg.Clone(); return nil })
}

// SASL authenticates every connection with m, for example
// plain.Auth{User: u, Pass: p}.AsMechanism() from franz-go's pkg/sasl/plain,
// or scram.Auth{...}.AsSha256Mechanism(). Default: none. When the broker
// limits the session (KIP-368, connections.max.reauth.ms), each connection
// is drained and replaced by a newly authenticated one before its session
// ends (see [ErrSessionRenewal]), so no batch is cut. m's Authenticate
// (for oauth, its token function) must return soon after its ctx is done:
// Close waits for the dials in progress.
func SASL(m sasl.Mechanism) Opt {
	return optFunc(func(c *config) error { c.sasl = m; return nil })
}

// Logger sets the logger; nil (the default) discards logs.
func Logger(l *slog.Logger) Opt {
	return optFunc(func(c *config) error { c.logger = l; return nil })
}

// Dialer replaces how connections are dialed (default net.Dialer), for
// proxies and tests. dial must return soon after its ctx is done: Close
// waits for the dials in progress.
func Dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Opt {
	return optFunc(func(c *config) error { c.dial = dial; return nil })
}
