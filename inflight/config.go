package inflight

// DefaultWindow is the per-partition limit before anything is learned from the
// partition's leader, and for brokers without KIP-1269 (the field absent). It
// is the deduplication window brokers have always had.
const DefaultWindow = 5

// Config configures a [Limiter]. The zero value is invalid: MaxRequestsPerConn
// must be set.
type Config struct {
	// MaxRequestsPerConn is max.in.flight.requests.per.connection: requests in
	// flight on one connection to a node. At least 1, no upper bound, and no
	// special case for idempotence (KIP-1269 removes the cap of 5).
	MaxRequestsPerConn int

	// MaxWindow is a user cap on the per-partition limit: 0 means none,
	// otherwise the limit is min(learned window, MaxWindow). Benchmarks set 5
	// to behave like clients without KIP-1269.
	MaxWindow int

	// OnInvalidWindow, if not nil, is called when a broker announces a window
	// <= 0 (a broker bug; the window is taken as 5). It is called at most once
	// per partition per distinct value in a row, without the Limiter's lock
	// held, from the goroutine calling [Limiter.Complete]; it must not block.
	OnInvalidWindow func(topic string, partition int32, value int32)

	// OnLimitChange, if not nil, is called whenever a partition's limit
	// ([Limiter.Limit]) changes, with the old and new values and why,
	// without the Limiter's lock held, from the goroutine whose call
	// changed it; it must not block. A partition starts at [DefaultWindow]
	// (or MaxWindow if lower) without a call. With it set, NewConnection
	// and ResetAll visit the partitions they reset at once, rather than
	// let each catch up when next used.
	OnLimitChange func(topic string, partition int32, old, new int, why Cause)
}

// Cause says why a partition's limit changed, for [Config.OnLimitChange].
type Cause uint8

const (
	// CauseLearned: [Limiter.Complete] took a window from a response.
	CauseLearned Cause = iota + 1
	// CauseLeader: [Limiter.SetLeader] named another leader or epoch.
	CauseLeader
	// CauseConnection: [Limiter.NewConnection] or
	// [Limiter.SetNodeWindowCap] for the partition's leader.
	CauseConnection
	// CauseReset: [Limiter.Reset].
	CauseReset
	// CauseResetAll: [Limiter.ResetAll].
	CauseResetAll
)

// validate checks every field; its errors name the property and the range.
func (c *Config) validate() error {
	if c.MaxRequestsPerConn < 1 {
		return &ConfigError{Field: "max.in.flight.requests.per.connection", Value: c.MaxRequestsPerConn, Range: ">= 1"}
	}
	if c.MaxWindow < 0 {
		return &ConfigError{Field: "MaxWindow", Value: c.MaxWindow, Range: ">= 0 (0 = no cap)"}
	}
	return nil
}
