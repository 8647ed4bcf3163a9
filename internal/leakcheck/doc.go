// Package leakcheck fails a package's test run when a goroutine that its
// tests started is still running after the last one returned: a Close that
// does not stop its goroutines, or a test that forgets to stop what it
// started. Each package's TestMain calls [VerifyTestMain]. It wraps
// go.uber.org/goleak, which names each leaked goroutine's creator and stack,
// and waits longer than goleak alone (about half a second), since under
// -race on a loaded two-core machine a goroutine on its way out may take
// longer to be scheduled. Import it from tests only: it links goleak.
//
// # Concurrency
//
// VerifyTestMain runs once per test binary, from TestMain.
package leakcheck
