package topicadmin

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrNoBroker is returned by [Ensure] when no bootstrap server could be
// dialed; it wraps the last dial error.
var ErrNoBroker = errors.New("topicadmin: no bootstrap server reachable")

// TopicError is a broker's refusal to create a topic, or a topic error in
// Metadata that creating cannot fix. errors.Is(err, kerr.InvalidConfig)
// works through Unwrap.
type TopicError struct {
	Topic   string
	Code    int16  // Kafka error code
	Message string // the broker's message, may be empty
}

// Error implements error.
func (e *TopicError) Error() string {
	msg := kerr.ErrorForCode(e.Code).Error()
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return fmt.Sprintf("topicadmin: topic %q: %s", e.Topic, msg)
}

// Unwrap returns the kerr error of Code.
func (e *TopicError) Unwrap() error { return kerr.ErrorForCode(e.Code) }
