package otlp

import (
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}
