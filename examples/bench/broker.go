package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/linkproxy"
)

// brokerSpec is the cluster one case runs against: one node, the case's
// partitions spread over topics topics (--topics) named after topic.
type brokerSpec struct {
	rtt        time.Duration
	bandwidth  int64 // bytes/s per direction, 0 = no cap
	topic      string
	topics     int // 0 means 1
	partitions int
	window     int
	// kafka40: the embedded broker behaves as Kafka 4.0 (in-process only):
	// Produce up to v12, a transaction's first batch at any sequence.
	kafka40 bool
}

// topicList names the spec's topics, each with its partition count: the
// topic name itself when there is one, name-0, name-1, ... otherwise.
func (s brokerSpec) topicList(name string) []topicSpec {
	counts := topicParts(s.partitions, max(s.topics, 1))
	if len(counts) == 1 {
		return []topicSpec{{name, counts[0]}}
	}
	out := make([]topicSpec, len(counts))
	for i, n := range counts {
		out[i] = topicSpec{fmt.Sprintf("%s-%d", name, i), n}
	}
	return out
}

// topicSpec is one topic of a case and its partition count.
type topicSpec struct {
	name       string
	partitions int
}

// topicParts spreads partitions over n topics as evenly as they go: the
// first partitions%n topics get one more. The caller checked
// 1 <= n <= partitions.
func topicParts(partitions, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = partitions / n
		if i < partitions%n {
			out[i]++
		}
	}
	return out
}

// topicNames returns the names of ts, in order.
func topicNames(ts []topicSpec) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.name
	}
	return out
}

// runningBroker is a started cluster: in this process, or a child process
// of examples/broker so that its CPU and allocations are not the client's.
type runningBroker struct {
	addr   string
	topics []topicSpec // the case's topics
	pid    int         // broker process pid, 0 when in-process
	stop   func() error
	inner  *broker.Cluster // in-process only
	// proxy reads the link proxy's counters (Kafka target: the harness
	// proxy in this process); nil when the link is emulated elsewhere.
	proxy func() linkproxy.Stats
	// logFile is the Kafka node's log (Kafka target), "" otherwise.
	logFile string
}

// proxyStats reads the link proxy's counters; zero without one.
func (b *runningBroker) proxyStats() linkproxy.Stats {
	if b.proxy == nil {
		return linkproxy.Stats{}
	}
	return b.proxy()
}

// brokerStarter starts a fresh cluster per case; every case gets a new one
// because the embedded broker keeps its whole log in memory.
type brokerStarter struct {
	bin string // examples/broker binary; "" = in-process
}

// newBrokerStarter resolves how brokers run: mode "inproc", "child" (build
// examples/broker once into dir), or a path to a prebuilt binary.
func newBrokerStarter(mode, dir string) (*brokerStarter, error) {
	switch mode {
	case "inproc":
		return &brokerStarter{}, nil
	case "child":
		bin := filepath.Join(dir, "broker")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/longhaul-kafka/longhaul/examples/broker")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building examples/broker (run from the module, or use --broker inproc or --broker PATH): %w", err)
		}
		return &brokerStarter{bin: bin}, nil
	default:
		if _, err := os.Stat(mode); err != nil {
			return nil, fmt.Errorf("--broker %q: want inproc, child or a path to an examples/broker binary: %w", mode, err)
		}
		return &brokerStarter{bin: mode}, nil
	}
}

// target is where a case's broker comes from: the embedded broker
// (brokerStarter) or Apache Kafka (kafkaTarget).
type target interface {
	start(spec brokerSpec) (*runningBroker, error)
	describe() string
}

func (bs *brokerStarter) inProcess() bool { return bs.bin == "" }

func (bs *brokerStarter) describe() string {
	if bs.inProcess() {
		return "embedded, in this process (CPU and allocations include the broker)"
	}
	return "embedded, child process (client CPU and allocations exclude the broker)"
}

func (bs *brokerStarter) start(spec brokerSpec) (*runningBroker, error) {
	topics := spec.topicList(spec.topic)
	if bs.bin == "" {
		cfg := broker.Config{RTT: spec.rtt, Bandwidth: spec.bandwidth}
		if spec.kafka40 {
			cfg.ProduceMaxVersions = map[int32]int16{0: broker.Kafka40ProduceMaxVersion}
		}
		for _, t := range topics {
			cfg.Topics = append(cfg.Topics, broker.TopicConfig{Name: t.name, Partitions: int32(t.partitions), Window: spec.window})
		}
		c, err := broker.Start(cfg)
		if err != nil {
			return nil, err
		}
		c.SetLenientTransactionStart(spec.kafka40)
		return &runningBroker{addr: c.Addr(), topics: topics, stop: c.Close, inner: c}, nil
	}
	if spec.kafka40 {
		return nil, errors.New("a Kafka 4.0 broker (lh-w5-k40) runs in-process only: --broker inproc")
	}
	var arg []string
	for _, t := range topics {
		arg = append(arg, fmt.Sprintf("%s:%d:%d", t.name, t.partitions, spec.window))
	}
	cmd := exec.Command(bs.bin,
		"--addr", "127.0.0.1:0",
		"--rtt", spec.rtt.String(),
		"--bandwidth", strconv.FormatInt(spec.bandwidth, 10),
		"--topics", strings.Join(arg, ","))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	kill := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "bootstrap: "); ok && !sent {
				addr <- a
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			kill()
			return nil, errors.New("broker child exited before printing its address")
		}
		stop := func() error {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				return err
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				return <-done
			}
		}
		return &runningBroker{addr: a, topics: topics, pid: cmd.Process.Pid, stop: stop}, nil
	case <-time.After(30 * time.Second):
		kill()
		return nil, errors.New("broker child did not print its address within 30s")
	}
}

// waitCtx is a small helper for bounded shutdown waits.
func waitCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
