// Package cputime reads the CPU time the process has used, for the
// benchmarks that report CPU per byte or per request (examples/bench,
// linkproxy's BenchmarkRelease), where the platform can tell.
package cputime
