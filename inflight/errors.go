package inflight

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by the [*ConfigError] that [New] returns for a
// field out of range.
var ErrInvalidConfig = errors.New("inflight: invalid config")

// ConfigError reports a [Config] field out of range. It is returned by [New]
// and unwraps to [ErrInvalidConfig].
type ConfigError struct {
	Field string // Kafka property name, or the Go field name when there is none
	Value int    // the rejected value
	Range string // the allowed range, e.g. ">= 1"
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("inflight: %s = %d out of range, must be %s", e.Field, e.Value, e.Range)
}

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Panic messages for programmer errors; kept together so tests match them.
const (
	panicDoubleComplete = "inflight: Complete of a ticket that is not in flight (completed twice?)"
	panicZeroTicket     = "inflight: Complete of a zero Ticket"
	panicNoReservation  = "inflight: Finish of a request that holds no reservation (finished twice?)"
	panicHeld           = "inflight: Reserve into a request that still holds a reservation; Finish it first"
	panicForeign        = "inflight: Node or Partition belongs to another Limiter"
	panicNegative       = "inflight: request count went negative"
	panicReleasedPos    = "inflight: Reserve of a position already acknowledged or abandoned"
	panicFlyingPos      = "inflight: Reserve of a position already in flight"
	panicNodeCap        = "inflight: SetNodeWindowCap n < 0"
)
