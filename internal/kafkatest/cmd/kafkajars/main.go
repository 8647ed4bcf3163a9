// Command kafkajars resolves the Apache Kafka jars that internal/kafkatest
// runs into its cache directory, so that go test does not spend its timeout
// on Maven. scripts/install-kafka-deps.sh runs it; it is idempotent and
// prints the jar directory.
//
//	go run ./internal/kafkatest/cmd/kafkajars [-cache DIR]
//
// The cache defaults to $LONGHAUL_KAFKA_CACHE, else
// $HOME/.cache/longhaul/kafka-4.4.0.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
)

func main() {
	cache := flag.String("cache", kafkatest.CacheDir(), "jar cache directory")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up on Maven after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logf := func(format string, args ...any) { log.Printf(format, args...) }
	libs, err := kafkatest.EnsureJars(ctx, *cache, logf)
	if err != nil {
		log.Fatal(err)
	}
	jars, _ := filepath.Glob(filepath.Join(libs, "*.jar"))
	fmt.Fprintf(os.Stdout, "%s (%d jars, Kafka %s)\n", libs, len(jars), kafkatest.Version)
}
