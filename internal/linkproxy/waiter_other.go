//go:build !linux

package linkproxy

import "errors"

// newPreciseWaiter has no precise waiter to offer outside Linux; the proxy
// then uses a [timerWaiter].
func newPreciseWaiter() (waiter, error) {
	return nil, errors.New("linkproxy: no precise waiter on this platform")
}
