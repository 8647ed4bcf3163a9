package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// harnessTB lets this program drive internal/kafkatest, whose helpers take
// a testing.TB, outside go test. testing.TB cannot be implemented outside
// package testing (it has an unexported method), so harnessTB embeds a nil
// testing.TB for that method and implements every exported one itself;
// the unexported one is never called by the harness.
//
// Fatal and Skip unwind with a panic that [harnessTB.do] turns into an
// error, which is what runtime.Goexit does for a test. Cleanups run in
// [harnessTB.cleanup], last registered first. Log output goes to w.
type harnessTB struct {
	testing.TB // nil: only for the unexported method

	w        io.Writer
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	skipped  bool
	tempDirs []string
}

// tbStop is the panic value of Fatal and Skip.
type tbStop struct {
	msg  string
	skip bool
}

func newHarnessTB(w io.Writer) *harnessTB { return &harnessTB{w: w} }

// do runs f, returning the message of a Fatal or Skip inside it as an
// error. Other panics propagate.
func (t *harnessTB) do(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(tbStop)
			if !ok {
				panic(r)
			}
			if s.skip {
				err = fmt.Errorf("skipped: %s", s.msg)
			} else {
				err = fmt.Errorf("%s", s.msg)
			}
		}
	}()
	f()
	return nil
}

// cleanup runs the registered cleanups, last first, and removes the
// temporary directories.
func (t *harnessTB) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	t.mu.Lock()
	dirs := t.tempDirs
	t.tempDirs = nil
	t.mu.Unlock()
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

func (t *harnessTB) ArtifactDir() string    { return t.TempDir() }
func (t *harnessTB) Attr(key, value string) { t.Logf("attr %s=%s", key, value) }
func (t *harnessTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *harnessTB) Error(args ...any) { t.Log(args...); t.Fail() }
func (t *harnessTB) Errorf(format string, args ...any) {
	t.Logf(format, args...)
	t.Fail()
}
func (t *harnessTB) Fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}
func (t *harnessTB) FailNow() { t.Fail(); panic(tbStop{msg: "FailNow"}) }
func (t *harnessTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
func (t *harnessTB) Fatal(args ...any) { t.Fail(); panic(tbStop{msg: fmt.Sprint(args...)}) }
func (t *harnessTB) Fatalf(format string, args ...any) {
	t.Fail()
	panic(tbStop{msg: fmt.Sprintf(format, args...)})
}
func (t *harnessTB) Helper()                          {}
func (t *harnessTB) Log(args ...any)                  { fmt.Fprintln(t.w, args...) }
func (t *harnessTB) Logf(format string, args ...any)  { fmt.Fprintf(t.w, format+"\n", args...) }
func (t *harnessTB) Name() string                     { return "bench" }
func (t *harnessTB) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (t *harnessTB) Chdir(dir string)                 { _ = os.Chdir(dir) }
func (t *harnessTB) Skip(args ...any)                 { t.skip(fmt.Sprint(args...)) }
func (t *harnessTB) SkipNow()                         { t.skip("SkipNow") }
func (t *harnessTB) Skipf(format string, args ...any) { t.skip(fmt.Sprintf(format, args...)) }
func (t *harnessTB) Context() context.Context         { return context.Background() }
func (t *harnessTB) Output() io.Writer                { return t.w }
func (t *harnessTB) skip(msg string) {
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	panic(tbStop{msg: msg, skip: true})
}
func (t *harnessTB) Skipped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped
}
func (t *harnessTB) TempDir() string {
	d, err := os.MkdirTemp("", "longhaul-bench-kafka-")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tempDirs = append(t.tempDirs, d)
	return d
}
