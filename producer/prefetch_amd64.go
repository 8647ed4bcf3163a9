package producer

// prefetchLines issues PREFETCHW for every 64-byte line of the n bytes at
// p (prefetch_amd64.s).
//
//go:noescape
func prefetchLines(p *byte, n int)
