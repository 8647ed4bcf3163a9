package soak

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSoak runs the chaos soak: about 10 s of producing in the normal
// suite, or LONGHAUL_SOAK (a duration, e.g. 10m) for a long run:
//
//	LONGHAUL_SOAK=10m go test -run TestSoak -timeout 0 ./internal/soak/
//
// LONGHAUL_SOAK_SEED replays a seed; LONGHAUL_SOAK_DEBUG=1 logs producer
// warnings to stderr, LONGHAUL_SOAK_DEBUG=debug everything.
func TestSoak(t *testing.T) {
	cfg := Config{Duration: 10 * time.Second}
	if v := os.Getenv("LONGHAUL_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LONGHAUL_SOAK=%q: %v", v, err)
		}
		cfg.Duration = d
	}
	if v := os.Getenv("LONGHAUL_SOAK_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LONGHAUL_SOAK_SEED=%q: %v", v, err)
		}
		cfg.Seed = seed
	}
	if v := os.Getenv("LONGHAUL_SOAK_DEBUG"); v != "" {
		level := slog.LevelWarn
		if v == "debug" {
			level = slog.LevelDebug
		}
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(res.String())
	t.Log(res.String())
	for c, n := range res.FailCauses {
		t.Logf("failed: %d x %s", n, c)
	}
	if err := res.Err(); err != nil {
		for _, p := range res.Problems {
			t.Log(p)
		}
		t.Fatalf("%v\nreproduce: LONGHAUL_SOAK_SEED=%d LONGHAUL_SOAK=%v go test -run TestSoak -timeout 0 ./internal/soak/", err, res.Seed, cfg.Duration)
	}
	if res.Acked == 0 || len(res.Faults) < 5 {
		t.Errorf("the soak did too little to prove anything: %s", res)
	}
}
