package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// startBroker starts a fake KIP-1269 cluster from package producertest,
// which stands in for Kafka in these examples (and can in your tests). Its
// topic "events" retains 50 batches per producer
// (producer.state.batches.to.retain=50).
func startBroker() *producertest.Cluster {
	c, err := producertest.Start(1, producertest.Topic{Name: "events", Partitions: 2, Window: 50})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// Produce is asynchronous: the callback reports each record's outcome,
// and Flush waits for all of them.
func Example() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	ctx := context.Background()
	done := make(chan string, 3)
	for i := range 3 {
		r := &producer.Record{Topic: "events", Value: fmt.Appendf(nil, "event %d", i)}
		r.SetPartition(0)
		p.Produce(ctx, r, func(r *producer.Record, err error) {
			if err != nil {
				done <- "failed: " + err.Error()
				return
			}
			done <- fmt.Sprintf("%s at partition %d, offset %d", r.Value, r.Partition(), r.Offset)
		})
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		fmt.Println(<-done)
	}
	// Output:
	// event 0 at partition 0, offset 0
	// event 1 at partition 0, offset 1
	// event 2 at partition 0, offset 2
}

// ProduceSync waits for its records and returns the first error; on
// success each record's Partition and Offset are set.
func ExampleProducer_ProduceSync() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	a := &producer.Record{Topic: "events", Key: []byte("user-1"), Value: []byte("signed up")}
	b := &producer.Record{Topic: "events", Key: []byte("user-1"), Value: []byte("logged in")}
	if err := p.ProduceSync(context.Background(), a, b).FirstErr(); err != nil {
		log.Fatal(err)
	}
	// The same key lands on the same partition, in order.
	fmt.Println(a.Partition() == b.Partition(), b.Offset-a.Offset)
	// Output: true 1
}

// The producer starts every partition at 5 batches in flight and learns
// the broker's window from its ProduceResponses; Stats and InFlightLimit
// show it.
func ExampleProducer_Stats() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(
		producer.BootstrapServers(c.Addr()),
		// The per-connection cap must not be below the window, or it is
		// the limit instead.
		producer.MaxInFlightRequestsPerConnection(100),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	fmt.Println("before:", p.InFlightLimit("events", 0))
	r := &producer.Record{Topic: "events", Value: []byte("hello")}
	r.SetPartition(0)
	if err := p.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		log.Fatal(err)
	}
	for _, ps := range p.Stats().Partitions {
		fmt.Printf("%s[%d]: limit %d, %d batches sent\n", ps.Topic, ps.Partition, ps.Limit, ps.BatchesSent)
	}
	// Output:
	// before: 5
	// events[0]: limit 50, 1 batches sent
	// events[1]: limit 5, 0 batches sent
}

// A Java producer configuration works as is: Kafka's property names and
// defaults, and Java-only properties such as key.serializer are ignored.
// Invalid values fail at construction, naming the property.
func ExampleNewFromProperties() {
	c := startBroker()
	defer c.Close()

	props := map[string]string{
		"bootstrap.servers":                     c.Addr(),
		"linger.ms":                             "10",
		"compression.type":                      "zstd",
		"max.in.flight.requests.per.connection": "50",
		"key.serializer":                        "org.apache.kafka.common.serialization.StringSerializer",
	}
	p, err := producer.NewFromProperties(props)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	r := &producer.Record{Topic: "events", Key: []byte("k"), Value: []byte("v")}
	fmt.Println(p.ProduceSync(context.Background(), r).FirstErr())

	props["acks"] = "1" // idempotence needs acks=all
	_, err = producer.NewFromProperties(props)
	var ce *producer.ConfigError
	if errors.As(err, &ce) {
		fmt.Printf("rejected %s=%s\n", ce.Property, ce.Value)
	}
	// Output:
	// <nil>
	// rejected acks=1
}

// The README's configuration table is generated from the property table,
// so it cannot drift: this test fails when they differ, and with
// LONGHAUL_UPDATE_README=1 it rewrites the table instead.

const (
	tableBegin = "<!-- config-table:begin -->"
	tableEnd   = "<!-- config-table:end -->"
)

// typedOptions maps each property to its typed option; the option's name
// is read from the function itself, so a rename cannot go unnoticed.
var typedOptions = map[string]any{
	"bootstrap.servers":                     producer.BootstrapServers,
	"client.id":                             producer.ClientID,
	"max.in.flight.requests.per.connection": producer.MaxInFlightRequestsPerConnection,
	"batch.size":                            producer.BatchSize,
	"linger.ms":                             producer.Linger,
	"buffer.memory":                         producer.BufferMemory,
	"max.request.size":                      producer.MaxRequestSize,
	"delivery.timeout.ms":                   producer.DeliveryTimeout,
	"request.timeout.ms":                    producer.RequestTimeout,
	"retry.backoff.ms":                      producer.RetryBackoff,
	"retry.backoff.max.ms":                  producer.RetryBackoffMax,
	"compression.type":                      producer.Compression,
	"metadata.max.age.ms":                   producer.MetadataMaxAge,
	"max.block.ms":                          producer.MaxBlock,
	"metadata.max.idle.ms":                  producer.MetadataMaxIdle,
	"longhaul.max.window":                   producer.MaxWindow,
	"longhaul.idle.rearm.ms":                producer.IdleRearm,
	"longhaul.readback.enable":              producer.ReadBack,
	"longhaul.readback.max.bytes":           producer.ReadBackMaxBytes,
	"longhaul.readback.timeout.ms":          producer.ReadBackTimeout,
	"transactional.id":                      producer.TransactionalID,
	"transaction.timeout.ms":                producer.TransactionTimeout,
}

// propertyOnly are properties without a typed option, with what to say in
// the option column instead.
var propertyOnly = map[string]string{
	"acks":                     "fixed: all",
	"enable.idempotence":       "fixed: true",
	"retries":                  "fixed: 2147483647",
	"allow.auto.create.topics": "`Property`",
	"partitioner.ignore.keys":  "`Property`",
	"partitioner.adaptive.partitioning.enable": "`Property`",
	"client.rack":                              "`Property`",
	"partitioner.rack.aware":                   "`Property`",
	"partitioner.availability.timeout.ms":      "`Property`",
	"metadata.recovery.strategy":               "`Property`",
	"metadata.recovery.rebootstrap.trigger.ms": "`Property`",
	"partitioner.class":                        "`Property`, or `RecordPartitioner`",
	"compression.gzip.level":                   "`Property`",
	"longhaul.coalesce.requests":               "`Property`",
	"compression.lz4.level":                    "`Property`",
	"compression.zstd.level":                   "`Property`",
	"partitioner":                              "`Property`, or `RecordPartitioner`",
	"security.protocol":                        "`Property`, or `TLS`/`SASL`",
	"sasl.mechanism":                           "`Property`, or `SASL`",
	"sasl.jaas.config":                         "`Property`, or `SASL`",
	"enable.metrics.push":                      "`Property`",
}

func optionName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// configTable renders the README table from the producer's property table.
func configTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| Kafka property | option | default | meaning |\n|---|---|---|---|\n")
	for _, name := range producer.PropertyNames() {
		opt := ""
		if fn, ok := typedOptions[name]; ok {
			opt = "`" + optionName(fn) + "`"
		} else if s, ok := propertyOnly[name]; ok {
			opt = s
		} else {
			t.Errorf("property %s has no entry in typedOptions or propertyOnly (example_test.go): add it so the README can say how to set it", name)
			continue
		}
		def, _ := producer.PropertyDefault(name)
		switch {
		case name == "bootstrap.servers":
			def = "(required)"
		case def == "":
			def = "(none)"
		default:
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, opt, cell(def), cell(producer.PropertyDoc(name)))
	}
	return b.String()
}

func TestREADMEConfigTable(t *testing.T) {
	const path = "../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %s ... %s markers", tableBegin, tableEnd)
	}
	want := configTable(t)
	got := readme[i+len(tableBegin)+1 : j]
	if got == want {
		return
	}
	if os.Getenv("LONGHAUL_UPDATE_README") == "1" {
		updated := readme[:i+len(tableBegin)+1] + want + readme[j:]
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the configuration table in %s", path)
		return
	}
	t.Errorf("README.md's configuration table differs from the property table; run\n\tLONGHAUL_UPDATE_README=1 go test -run TestREADMEConfigTable ./producer\ngot:\n%s\nwant:\n%s", got, want)
}

// TestREADMEUsageCompiles builds the README's usage example as a program
// of its own module that requires this one, so the snippet stays valid.
// It needs the go command and the module cache (no network).
func TestREADMEUsageCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "\n## Usage\n")
	if !ok {
		t.Fatal("README.md has no Usage section")
	}
	_, code, ok := strings.Cut(rest, "```go\n")
	if ok {
		code, _, ok = strings.Cut(code, "```")
	}
	if !ok {
		t.Fatal("README.md's Usage section has no ```go block")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module readmeusage\n\ngo 1.26.0\n\nrequire github.com/longhaul-kafka/longhaul v0.0.0\n\nreplace github.com/longhaul-kafka/longhaul => " + root + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(code)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gobin, "build", "-o", filepath.Join(dir, "usage"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README usage example does not build: %v\n%s\n--- main.go ---\n%s", err, out, code)
	}
}

// TestREADMECommandsAreRun checks that every command README.md shows as a
// block (indented four or more spaces, starting with go or bash) is run by
// scripts/examples-smoke.sh or by CI (.ci/run), so none can rot unseen.
func TestREADMECommandsAreRun(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	smoke, err := os.ReadFile("../scripts/examples-smoke.sh")
	if err != nil {
		t.Fatal(err)
	}
	ci, ciErr := os.ReadFile("../.ci/run")
	if ciErr == nil {
		// .ci/run runs the dependency script, and with it what it runs.
		deps, err := os.ReadFile("../scripts/install-kafka-deps.sh")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ci), "bash scripts/install-kafka-deps.sh") {
			t.Fatal(".ci/run no longer runs scripts/install-kafka-deps.sh")
		}
		ci = append(ci, deps...)
	}
	// The smoke script runs the standalone broker as a built binary (so it
	// can be stopped by pid) and points clients at the address it prints.
	normalize := strings.NewReplacer(
		"go run ./examples/broker", `"$tmp/broker"`,
		"127.0.0.1:9092", `"$bootstrap"`,
	)
	var n int
	for _, line := range strings.Split(string(readme), "\n") {
		cmd := strings.TrimLeft(line, " ")
		if len(line)-len(cmd) < 4 || !(strings.HasPrefix(cmd, "go ") || strings.HasPrefix(cmd, "bash ")) {
			continue
		}
		n++
		cmd = strings.TrimSpace(cmd)
		if strings.Contains(string(smoke), normalize.Replace(cmd)) {
			continue
		}
		if ciErr != nil {
			t.Logf("%q is not in the smoke script; .ci/run is not here to check (%v)", cmd, ciErr)
			continue
		}
		if !strings.Contains(string(ci), cmd) {
			t.Errorf("README command %q is run neither by scripts/examples-smoke.sh nor by .ci/run", cmd)
		}
	}
	if n < 5 {
		t.Errorf("found only %d commands in README.md; did its layout change?", n)
	}
}

// A transactional producer writes records (and a consumer's offsets)
// atomically: read_committed consumers see all of a committed
// transaction and nothing of an aborted one.
func ExampleProducer_BeginTransaction() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.TransactionalID("orders-service-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	ctx := context.Background()
	// Fences any earlier instance with the same transactional id.
	if err := p.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}
	for i, commit := range []bool{true, false} {
		if err := p.BeginTransaction(); err != nil {
			log.Fatal(err)
		}
		r := &producer.Record{Topic: "events", Value: fmt.Appendf(nil, "transaction %d", i)}
		r.SetPartition(0)
		p.Produce(ctx, r, nil)
		offsets := []producer.TransactionOffset{{Topic: "input", Partition: 0, Offset: int64(10 * (i + 1)), LeaderEpoch: -1}}
		group := producer.GroupMetadata{GroupID: "orders", Generation: -1}
		if err := p.SendOffsetsToTransaction(ctx, group, offsets); err != nil {
			log.Fatal(err)
		}
		if commit {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	// The coordinator writes the markers just after answering the commit.
	for c.LastStableOffset("events", 0) < 4 {
		time.Sleep(time.Millisecond)
	}
	for _, r := range c.CommittedRecords("events", 0) {
		fmt.Printf("%s\n", r.Value)
	}
	off, _ := c.CommittedOffset("orders", "input", 0)
	fmt.Println("committed offset", off)
	// Output:
	// transaction 0
	// committed offset 10
}
