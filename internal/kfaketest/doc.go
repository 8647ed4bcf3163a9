// Package kfaketest holds the producer tests that run against franz-go's
// kfake, an independent Kafka implementation without KIP-1269. It is a
// module of its own, with only tests, so that kfake is not in the root
// module's go.mod: a user's module that requires longhaul then has no kfake
// in its module graph or go.sum. The tests use only the exported producer
// API. CI runs them from .ci/run (cd internal/kfaketest && go test ./...),
// as it runs the metrics plugins' modules.
package kfaketest
