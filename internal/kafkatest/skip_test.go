package kafkatest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recordTB captures Skip and Fatal instead of acting on the real test.
type recordTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runStart(t *testing.T) *recordTB {
	r := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r, Options{})
	}()
	<-done
	return r
}

// TestStartWithoutJavaSkipsOrFails checks both sides of the CI switch: no
// java on PATH skips with install advice, unless LONGHAUL_REQUIRE_KAFKA=1
// makes it a failure.
func TestStartWithoutJavaSkipsOrFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LONGHAUL_KAFKA_CACHE", t.TempDir())

	t.Setenv("LONGHAUL_REQUIRE_KAFKA", "")
	r := runStart(t)
	if !r.skipped || r.failed || !strings.Contains(r.msg, "install-kafka-deps.sh") {
		t.Fatalf("without java and without LONGHAUL_REQUIRE_KAFKA: skipped=%v failed=%v msg=%q", r.skipped, r.failed, r.msg)
	}

	t.Setenv("LONGHAUL_REQUIRE_KAFKA", "1")
	r = runStart(t)
	if r.skipped || !r.failed || !strings.Contains(r.msg, "Java 17+") {
		t.Fatalf("without java and with LONGHAUL_REQUIRE_KAFKA=1: skipped=%v failed=%v msg=%q", r.skipped, r.failed, r.msg)
	}
}
