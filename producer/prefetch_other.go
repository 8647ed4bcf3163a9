//go:build !amd64

package producer

// prefetchLines does nothing where no prefetch instruction is wired up
// (prefetch_amd64.s has amd64's).
func prefetchLines(*byte, int) {}
