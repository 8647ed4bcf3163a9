// Command kip1269agent builds the KIP-1269 Java agent for Apache Kafka
// 4.4 (internal/kafkatest/kip1269agent) and prints the JVM flag that
// loads it, so that anyone can run their own Kafka 4.4 broker as a
// KIP-1269 broker (docs/kip1269-agent.md is the operator's page):
//
//	go run ./internal/kafkatest/cmd/kip1269agent -o kip1269-agent.jar
//	export KAFKA_OPTS="-javaagent:$PWD/kip1269-agent.jar"
//	bin/kafka-server-start.sh config/server.properties
//
// Without -o it prints the flag for the jar in the build cache:
//
//	export KAFKA_OPTS="$(go run ./internal/kafkatest/cmd/kip1269agent)"
//
// It needs java, javac (a JDK 17+) and mvn: the first run resolves the
// Kafka jars and Byte Buddy with Maven into the harness cache
// ($LONGHAUL_KAFKA_CACHE, default $HOME/.cache/longhaul/kafka-4.4.0) and
// compiles the agent there; later runs reuse the jar until the agent's
// source changes. -o copies the jar out of the cache (one
// self-contained file: copy it to every broker). Only the flag goes to
// stdout; how to use it goes to stderr. The agent is a test and
// evaluation tool, not a Kafka fork.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
)

func main() {
	cache := flag.String("cache", kafkatest.CacheDir(), "jar cache directory")
	out := flag.String("o", "", "copy the agent jar to this file (default: print the cached jar's flag)")
	args := flag.String("args", "", `agent arguments: "" or "tag=always" (announce the window also when it is 5)`)
	timeout := flag.Duration("timeout", 15*time.Minute, "give up on Maven and javac after this long")
	flag.Parse()
	if *args != "" && *args != "tag=always" && *args != "tag=default" {
		fmt.Fprintf(os.Stderr, "kip1269agent: -args %q: want \"\", tag=always or tag=default\n", *args)
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kip1269agent: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logf := func(format string, a ...any) { log.Printf(format, a...) }
	jar, err := kafkatest.EnsureAgent(ctx, *cache, logf)
	if err != nil {
		log.Fatal(err)
	}
	if *out != "" {
		dst, err := filepath.Abs(*out)
		if err != nil {
			log.Fatal(err)
		}
		if err := copyFile(dst, jar); err != nil {
			log.Fatalf("kip1269agent: %v", err)
		}
		jar = dst
	}
	flagText := kafkatest.AgentFlag(jar, *args)
	fmt.Println(flagText)
	fmt.Fprintf(os.Stderr, `
KIP-1269 agent for Apache Kafka %s: %s
Start a broker with it, for example:
  KAFKA_OPTS="%s" bin/kafka-server-start.sh config/server.properties
Its stdout must show "%spatched <class>" for %d classes, and none "FAILED".
On any Kafka other than 4.4.x it refuses to start the JVM.
Topic config producer.state.batches.to.retain (default 5, at least 5); broker default
log.producer.state.batches.to.retain. Create topics with it from a client (kafka-topics.sh
validates configs in its own JVM: give that JVM the same KAFKA_OPTS).
`, kafkatest.Version, jar, flagText, kafkatest.AgentLogPrefix, len(kafkatest.AgentPatchedClasses))
}

// copyFile writes src's content to dst through a temporary file in dst's
// directory, so that a broker never sees a half-written jar.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".kip1269-agent-*.jar")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
