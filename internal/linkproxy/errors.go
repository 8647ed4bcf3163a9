package linkproxy

import "errors"

// ErrClosed is returned by [Proxy.CutRandomly] when the proxy has been
// closed with [Proxy.Close].
var ErrClosed = errors.New("linkproxy: proxy closed")
