// Package testhooks reaches test-only knobs of the module's public packages
// from its other packages, so that the knobs stay out of the public API (as
// net/http keeps testHookEnterRoundTrip unexported). A public package sets
// its hooks when it is initialised, and only in builds with the
// longhaul_regress tag: in the default build every hook is nil. Nothing
// outside the module can import this package.
package testhooks

// FixedWindow is set by package inflight. It makes limiter l, which must be
// an *inflight.Limiter, ignore learned windows and the first-batch gate and use n as every partition's limit, for negative
// controls and benchmarks only: above the broker's real window a retried
// batch may be appended twice or rejected as out of order. Draining and the
// node cap still apply; n == 0 restores normal behaviour, n < 0 panics.
var FixedWindow func(l any, n int)

// NoSessionRenewal is set by package producer to a producer.Opt (typed
// any here to avoid an import cycle) that turns off the KIP-368 renewal of
// SASL sessions: connections are used until the broker closes them at
// session end, cutting the requests that arrive too late. For the
// real-Kafka negative control only.
var NoSessionRenewal any
