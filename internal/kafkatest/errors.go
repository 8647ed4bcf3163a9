package kafkatest

import (
	"errors"
	"fmt"
)

var (
	// ErrMissingTools is returned by [EnsureJars] (and makes [Start] skip or
	// fail) when java or mvn is not on PATH.
	ErrMissingTools = errors.New("kafkatest: java and mvn are needed (and javac for the KIP-1269 agent): install Java 17+ (a JDK) and Maven, or run scripts/install-kafka-deps.sh")

	// ErrNoSummary is returned by [ParsePerfSummary] when the output has no
	// final summary line of ProducerPerformance.
	ErrNoSummary = errors.New("kafkatest: no ProducerPerformance summary line")
)

// errPortTaken means a JVM could not bind a port we picked; another process
// took it between our probe and the bind, so Start retries with new ports.
var errPortTaken = errors.New("kafkatest: port taken")

// ResponseError is a Kafka error code in an admin response, with the
// operation and resource it came from. Unwrap gives the kerr error.
type ResponseError struct {
	Op       string // for example "CreateTopics"
	Resource string // topic or topic/partition
	Err      error  // from kerr.ErrorForCode
	Message  string // the broker's error message, if any
}

func (e *ResponseError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("kafkatest: %s %s: %v: %s", e.Op, e.Resource, e.Err, e.Message)
	}
	return fmt.Sprintf("kafkatest: %s %s: %v", e.Op, e.Resource, e.Err)
}

func (e *ResponseError) Unwrap() error { return e.Err }
