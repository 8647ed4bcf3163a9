package producer

import (
	"errors"
	"fmt"
)

// ErrClosed is the error of every record that the producer could not deliver
// because it was closed: records passed to Produce after Close, and records
// still buffered when Close's context ran out. It is wrapped in a
// [DeliveryError] for records that had been sent, whose fate is then unknown.
var ErrClosed = errors.New("producer: closed")

// ErrDeliveryTimeout is the error of records not acknowledged within
// delivery.timeout.ms of their Produce call. It is wrapped in a
// [DeliveryError]; check [IsFateUnknown] before producing such a record again.
var ErrDeliveryTimeout = errors.New("producer: delivery.timeout.ms expired")

// ErrOrderLost is the error of records that were not written and can no
// longer be written in order: a later batch of their partition was written
// first (or may have been: it failed with FateUnknown), which happens when
// the broker had lost this producer's state (KIP-854 producer-id expiry, a
// leader without our state) while several batches were in flight. It is
// wrapped in a [DeliveryError]; the records are not in the log and may be
// produced again, after the later ones.
var ErrOrderLost = errors.New("producer: a later batch was written first (broker lost the producer state); not written, to keep order")

// ErrPartitionGone is the error of records that waited for a partition
// which no longer exists: their topic was deleted and created again with
// fewer partitions. It is wrapped in a [DeliveryError] naming the
// partition; FateUnknown tells whether an attempt may have been written to
// the deleted topic (whose log is gone with it). Records produced after
// the change are placed over the current partitions.
var ErrPartitionGone = errors.New("producer: partition no longer exists (topic re-created with fewer partitions)")

// ErrSessionRenewal is the cause [HookBrokerDisconnect] gets when the
// producer closed a broker connection itself to renew its SASL session
// (KIP-368) before the broker's connections.max.reauth.ms ended it: at a
// random 85 to 95 % of the session lifetime the broker announced, it stops
// sending on the connection, lets every request in flight on it be
// answered, closes it and connects again (authenticating anew) for the
// next batch, so no batch is cut by the broker closing the session. It
// never reaches a record's callback.
var ErrSessionRenewal = errors.New("producer: connection closed to renew its SASL session (KIP-368)")

// ErrRecordTooLarge is the error of a record whose encoded size exceeds
// max.request.size or buffer.memory. Only that record fails.
var ErrRecordTooLarge = errors.New("producer: record too large")

// ErrInvalidRecord is the error of a record the producer rejects before
// buffering it: a nil record, an empty topic, or an explicit partition that
// the topic does not have.
var ErrInvalidRecord = errors.New("producer: invalid record")

// ErrBufferFull is returned by TryProduce's callback when buffer.memory is
// exhausted and the record was not accepted, and by Produce's when Produce
// was called from a record callback (which must not wait for the bytes
// that callbacks give back) or a hook (whose sender goroutine must not wait).
var ErrBufferFull = errors.New("producer: buffer.memory full")

// ErrTopicMetadata is the error of records whose topic the producer could
// not learn: the broker answered a code no retry can change for it
// (records fail at once: INVALID_TOPIC_EXCEPTION for a name Kafka refuses,
// TOPIC_AUTHORIZATION_FAILED, and POLICY_VIOLATION, INVALID_PARTITIONS or
// INVALID_CONFIG for an auto-creation refused by a pre-4.0 broker), or
// max.block.ms passed without the topic's partitions being known (for
// example UNKNOWN_TOPIC_OR_PARTITION, with topic auto-creation off or
// refused by a Kafka 4 controller). It is wrapped in a [DeliveryError]
// together with the broker's error, so errors.Is(err,
// kerr.InvalidTopicException) and errors.Is(err,
// kerr.UnknownTopicOrPartition) work. The records were never sent.
var ErrTopicMetadata = errors.New("producer: topic metadata unavailable")

// ErrPurged is wrapped by the [*DeliveryError] of every record
// [Producer.Purge] failed before it was sent: no broker saw it, so it is
// safe to produce again.
var ErrPurged = errors.New("producer: purged before it was sent")

// ErrInFlight is wrapped, with the context's error, in the
// [*DeliveryError] (marked FateUnknown) of a [Producer.ProduceSync] record
// that had been sent when the context ended: it could not be withdrawn and
// completes in the background.
var ErrInFlight = errors.New("producer: still in flight when the context ended")

// ErrInCallback is returned by [Producer.Flush], [Producer.ProduceSync],
// [Producer.Purge] and [Producer.Close] when called from a record callback or a hook: they wait
// for callbacks to run and for the sender to send, and callbacks run one at
// a time on the callback goroutine, hooks on the sender goroutine (see
// [Hook]), the goroutine that would be waiting, so the call could never
// return.
var ErrInCallback = errors.New("producer: called from a record callback or hook, where it would deadlock")

// ErrInvalidConfig is wrapped by every [*ConfigError], so
// errors.Is(err, ErrInvalidConfig) tells a configuration mistake from other
// errors of [New] and [NewFromProperties], as inflight.ErrInvalidConfig
// does for the limiter's.
var ErrInvalidConfig = errors.New("producer: invalid config")

// ConfigError is returned by [New] and [NewFromProperties] for an unknown
// property or an invalid value. It names the property and the allowed range,
// and unwraps to [ErrInvalidConfig].
type ConfigError struct {
	Property string // Kafka property name, e.g. "batch.size"
	Value    string // the value given, as text; from an option, as Go writes it (e.g. -1ms, "brotli")
	Reason   string // what is allowed, in the units of the property, or of the option when Option is set
	Option   string // the typed option that gave Value, e.g. "Linger"; "" for a property
}

// Error implements error.
func (e *ConfigError) Error() string {
	if e.Option != "" {
		return fmt.Sprintf("producer: invalid %s(%s): %s %s", e.Option, e.Value, e.Property, e.Reason)
	}
	if e.Value == "" {
		return fmt.Sprintf("producer: %s: %s", e.Property, e.Reason)
	}
	return fmt.Sprintf("producer: invalid %s=%q: %s", e.Property, e.Value, e.Reason)
}

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// DeliveryError is the error of records that failed after they were
// accepted: it says where they were going and why they failed.
type DeliveryError struct {
	Topic        string
	Partition    int32
	BaseSequence int32 // the batch's first sequence number, -1 if never sent
	// FateUnknown is true when the records were sent and may be in the log
	// even though they are reported as failed (for example when
	// delivery.timeout.ms ran out while a response was lost). Records
	// reported without FateUnknown are not in the log, except those
	// failed with [ErrWrittenTwice], which read-back found in it twice.
	// With read-back on (longhaul.readback.enable) such records are
	// called back only once the producer has read the partition back:
	// acknowledged if their batch was found, [ErrNotWritten] if it was
	// proven absent, FateUnknown only when it could not tell (an
	// ErrReadback* reason is wrapped in Err).
	FateUnknown bool
	// Err is the cause: ErrDeliveryTimeout, ErrClosed, or a broker error
	// from github.com/twmb/franz-go/pkg/kerr such as kerr.MessageTooLarge.
	Err error
}

// Error implements error.
func (e *DeliveryError) Error() string {
	fate := "not written"
	if e.FateUnknown {
		fate = "may have been written"
	}
	return fmt.Sprintf("producer: %s[%d] seq %d: %v (%s)", e.Topic, e.Partition, e.BaseSequence, e.Err, fate)
}

// Unwrap returns the cause, so errors.Is(err, ErrDeliveryTimeout) and
// errors.Is(err, kerr.MessageTooLarge) work.
func (e *DeliveryError) Unwrap() error { return e.Err }

// IsFateUnknown reports whether err says the records may have been written
// although they are reported as failed. Producing them again may duplicate
// them.
func IsFateUnknown(err error) bool {
	var de *DeliveryError
	return errors.As(err, &de) && de.FateUnknown
}

// errNoBrokers is wrapped when no broker of bootstrap.servers or the
// metadata could be dialed for a control request.
var errNoBrokers = errors.New("producer: no broker reachable")
