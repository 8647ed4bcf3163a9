// Command kafkajars resolves the Apache Kafka jars that internal/kafkatest
// runs into its cache directory, so that go test does not spend its timeout
// on Maven. scripts/install-kafka-deps.sh runs it; it is idempotent and
// prints each jar directory. By default it resolves every release of the
// compatibility matrix (kafkatest.Releases); -releases default resolves
// Kafka 4.4 only.
//
//	go run ./internal/kafkatest/cmd/kafkajars [-cache DIR] [-releases all|default]
//
// The cache defaults to $LONGHAUL_KAFKA_CACHE, else
// $HOME/.cache/longhaul/kafka-4.4.0; other releases go to its
// releases/<version> subdirectories.
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
	releases := flag.String("releases", "all", `"all" for every release of the compatibility matrix, or "default" for Kafka `+kafkatest.Version+` only`)
	flag.Parse()
	var rels []kafkatest.Release
	switch *releases {
	case "all":
		rels = kafkatest.Releases()
	case "default":
		rels = []kafkatest.Release{{}}
	default:
		log.Fatalf("-releases %q: want all or default", *releases)
	}
	// Every release's cache lives under the default one.
	os.Setenv("LONGHAUL_KAFKA_CACHE", *cache)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logf := func(format string, args ...any) { log.Printf(format, args...) }
	for _, r := range rels {
		libs, err := r.EnsureJars(ctx, logf)
		if err != nil {
			log.Fatal(err)
		}
		jars, _ := filepath.Glob(filepath.Join(libs, "*.jar"))
		fmt.Fprintf(os.Stdout, "%s (%d jars, %v)\n", libs, len(jars), r)
	}
}
