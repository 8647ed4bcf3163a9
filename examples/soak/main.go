// Command soak runs longhaul's chaos soak (internal/soak) from the command
// line and prints its one-line summary: a 3-node embedded KIP-1269 cluster,
// several producers, and a seeded fault schedule. It exits 1 if a check
// failed; rerun with the printed seed to replay the schedule.
//
//	go run ./examples/soak -duration 10m
//	go run ./examples/soak -seed 2279135456329919898 -v
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/soak"
)

func main() {
	var cfg soak.Config
	verbose := flag.Bool("v", false, "log producer warnings to stderr")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule; 0 picks one")
	flag.DurationVar(&cfg.Duration, "duration", time.Minute, "how long to produce under faults")
	flag.IntVar(&cfg.Producers, "producers", 3, "producers writing at once")
	flag.DurationVar(&cfg.FaultInterval, "fault-interval", 80*time.Millisecond, "mean time between faults")
	flag.IntVar(&cfg.Rate, "rate", 1500, "records per second per producer")
	flag.BoolVar(&cfg.ReadBack, "readback", false, "settle records of unknown fate by reading the log back (longhaul.readback.enable)")
	flag.Parse()
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// Ctrl-C ends the producing phase early; the checks still run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(res)
	if err := res.Err(); err != nil {
		for _, p := range res.Problems {
			fmt.Fprintln(os.Stderr, p)
		}
		os.Exit(1)
	}
}
