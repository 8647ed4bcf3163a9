package inflight

// State is where a partition stands in admission: how many of its batches
// may be in flight besides the window. The moves between states are one
// table, [State.next]; every change of a partition's state goes through it.
type State uint8

const (
	// Gated: nothing acknowledged since the last reset (new leader, new
	// connection, ResetAll, Reset): at most one batch in flight, because a
	// broker without state for the producer accepts a first batch at any
	// sequence.
	Gated State = iota
	// Open: up to the partition's limit in flight.
	Open
	// Draining: a batch failed while open; nothing new goes out until
	// every batch in flight is back, then the partition is Gated.
	Draining
	// DrainingGated: a batch failed, and the gate is armed (the failure
	// came while gated, or a reset came while draining); nothing new
	// goes out until every batch in flight is back, then Gated.
	DrainingGated
)

// String returns the state's name: "gated", "open", "draining" or
// "draining, gated".
func (s State) String() string {
	switch s {
	case Gated:
		return "gated"
	case Open:
		return "open"
	case Draining:
		return "draining"
	case DrainingGated:
		return "draining, gated"
	}
	return "unknown"
}

// event is what moves a partition from one State to another.
type event uint8

const (
	evReset   event = iota // a new generation: leader, connection, ResetAll, Reset
	evAcked                // a current ticket was acknowledged
	evFailed               // any ticket failed
	evDrained              // the last ticket in flight completed while draining
	numEvents
)

// transitions is every allowed move: transitions[s][e] is the state after
// event e in state s.
var transitions = [...][numEvents]State{
	Gated:         {evReset: Gated, evAcked: Open, evFailed: DrainingGated, evDrained: Gated},
	Open:          {evReset: Gated, evAcked: Open, evFailed: Draining, evDrained: Open},
	Draining:      {evReset: DrainingGated, evAcked: Draining, evFailed: Draining, evDrained: Gated},
	DrainingGated: {evReset: DrainingGated, evAcked: Draining, evFailed: DrainingGated, evDrained: Gated},
}

// next is the state after e.
func (s State) next(e event) State { return transitions[s][e] }

// gated reports whether the first-batch gate is armed.
func (s State) gated() bool { return s == Gated || s == DrainingGated }

// draining reports whether new batches wait for the ones in flight.
func (s State) draining() bool { return s == Draining || s == DrainingGated }
