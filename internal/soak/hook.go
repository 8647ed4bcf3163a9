package soak

import (
	"time"

	"github.com/longhaul-kafka/longhaul/producer"
)

// lossHook is a producer hook (producer.HookBrokerDisconnect) reporting each
// connection the producer gives up to onLoss with the node id, from the
// producer's sender goroutine, at the moment the producer stops counting
// that connection's batches as in flight.
type lossHook struct {
	onLoss func(node int32, at time.Time)
}

var _ producer.HookBrokerDisconnect = (*lossHook)(nil)

// OnBrokerDisconnect implements producer.HookBrokerDisconnect.
func (h *lossHook) OnBrokerDisconnect(node int32, _ string, _ error) {
	h.onLoss(node, time.Now())
}
