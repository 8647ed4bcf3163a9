package inflight

// A rule names one check of the admission path that a negative control of
// the model test can switch off, to show the model's safety checks catch
// it. Rules can be switched off only in builds with the longhaul_regress
// tag (regress_on.go); in the default build breaks is empty and its on
// method is the constant false (regress_off.go), so the compiler removes
// each branch that reads one.
type rule uint8

const (
	ignorePartitionLimit rule = iota // learned/default limit not applied, to counts or positions (gate still is)
	ignoreAnchor                     // positions not checked against the oldest unacknowledged one
	ackFreesEarlier                  // an ack releases every earlier position too (raft's cumulative FreeLE)
	ignoreAbandon                    // Abandon releases nothing
	ignoreGate                       // first-batch gate not applied
	ignoreDraining                   // new batches admitted while draining
	ignoreNodeCap                    // MaxRequestsPerConn not applied
	trustStale                       // stale completions learn and open the gate

	numRules
)

// The rules must fit in the longhaul_regress build's 16 bits.
var _ [16 - numRules]struct{}
