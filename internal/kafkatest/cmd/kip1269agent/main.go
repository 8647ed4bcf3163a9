// Command kip1269agent builds the KIP-1269 Java agent for Apache Kafka
// 4.4 (internal/kafkatest/kip1269agent) and prints the JVM flag that
// loads it, so that anyone can run their own Kafka 4.4 broker as a
// KIP-1269 broker:
//
//	export KAFKA_OPTS="$(go run ./internal/kafkatest/cmd/kip1269agent)"
//	bin/kafka-server-start.sh config/server.properties
//
// It needs java, javac (a JDK 17+) and mvn: the first run resolves the
// Kafka jars and Byte Buddy with Maven into the harness cache
// ($LONGHAUL_KAFKA_CACHE, default $HOME/.cache/longhaul/kafka-4.4.0) and
// compiles the agent there; later runs reuse the jar until the agent's
// source changes. Only the flag goes to stdout; how to use it goes to
// stderr. The agent is a test and evaluation tool, not a Kafka fork.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
)

func main() {
	cache := flag.String("cache", kafkatest.CacheDir(), "jar cache directory")
	args := flag.String("args", "", `agent arguments: "" or "tag=always" (announce the window also when it is 5)`)
	timeout := flag.Duration("timeout", 15*time.Minute, "give up on Maven and javac after this long")
	flag.Parse()
	if *args != "" && *args != "tag=always" && *args != "tag=default" {
		fmt.Fprintf(os.Stderr, "kip1269agent: -args %q: want \"\", tag=always or tag=default\n", *args)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logf := func(format string, a ...any) { log.Printf(format, a...) }
	jar, err := kafkatest.EnsureAgent(ctx, *cache, logf)
	if err != nil {
		log.Fatal(err)
	}
	flagText := kafkatest.AgentFlag(jar, *args)
	fmt.Println(flagText)
	fmt.Fprintf(os.Stderr, `
KIP-1269 agent for Apache Kafka %s: %s
Start a broker with it, for example:
  KAFKA_OPTS="%s" bin/kafka-server-start.sh config/server.properties
Its stdout must show "%spatched <class>" for %d classes, and none "FAILED".
Topic config producer.state.batches.to.retain (default 5, at least 5); broker default
log.producer.state.batches.to.retain. Create topics with it from a client (kafka-topics.sh
validates configs in its own JVM: give that JVM the same KAFKA_OPTS).
`, kafkatest.Version, jar, flagText, kafkatest.AgentLogPrefix, len(kafkatest.AgentPatchedClasses))
}
