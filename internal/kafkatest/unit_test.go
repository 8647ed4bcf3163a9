package kafkatest

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests need neither Java nor Kafka.

func TestPomListsKafkaArtifacts(t *testing.T) {
	pom := Pom()
	for _, a := range []string{"kafka_2.13", "kafka-server", "kafka-tools", "kafka-clients", "log4j-slf4j-impl", "log4j-core"} {
		if !strings.Contains(pom, "<artifactId>"+a+"</artifactId>") {
			t.Errorf("pom lacks %s", a)
		}
	}
	if strings.Count(pom, "<version>"+Version+"</version>") != 4 {
		t.Errorf("pom does not pin the four Kafka artifacts to %s:\n%s", Version, pom)
	}
	if Pom() != pom {
		t.Error("Pom is not deterministic; the cache marker would never match")
	}
}

func TestCacheDirHonoursEnv(t *testing.T) {
	t.Setenv("LONGHAUL_KAFKA_CACHE", "/x/y")
	if got := CacheDir(); got != "/x/y" {
		t.Fatalf("CacheDir = %q", got)
	}
	t.Setenv("LONGHAUL_KAFKA_CACHE", "")
	if got := CacheDir(); !strings.HasSuffix(got, "longhaul/kafka-"+Version) {
		t.Fatalf("default CacheDir = %q", got)
	}
}

func TestServerPropertiesListenersAndOverrides(t *testing.T) {
	c := &Cluster{}
	for i := range 3 {
		c.nodes = append(c.nodes, &node{
			id: int32(i), dir: "/d",
			directAddr: "127.0.0.1:1" + string(rune('0'+i)), proxiedListen: "127.0.0.1:2" + string(rune('0'+i)),
			controllerAddr: "127.0.0.1:3" + string(rune('0'+i)), advertised: "127.0.0.1:4" + string(rune('0'+i)),
		})
	}
	props := serverProperties(c, c.nodes[1], map[string]string{"auto.create.topics.enable": "true", "x.y": "z"})
	for _, want := range []string{
		"node.id=1\n",
		"controller.quorum.voters=0@127.0.0.1:30,1@127.0.0.1:31,2@127.0.0.1:32\n",
		"listeners=DIRECT://127.0.0.1:11,PROXIED://127.0.0.1:21,CONTROLLER://127.0.0.1:31\n",
		"advertised.listeners=DIRECT://127.0.0.1:11,PROXIED://127.0.0.1:41\n",
		"inter.broker.listener.name=DIRECT\n",
		"offsets.topic.replication.factor=3\n",
		"auto.create.topics.enable=true\n", // override wins
		"x.y=z\n",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("server.properties lacks %q:\n%s", want, props)
		}
	}
	if strings.Count(props, "auto.create.topics.enable=") != 1 {
		t.Error("override duplicated a key")
	}
}

func TestClusterIDShape(t *testing.T) {
	for range 200 {
		id, err := newClusterID()
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 22 || strings.HasPrefix(id, "-") {
			t.Fatalf("bad cluster id %q", id)
		}
	}
}

// TestIdempotentBatchDecodes checks our batch builders (idempotent and
// transactional) against kmsg's decoder and an independent CRC-32C of the
// bytes.
func TestIdempotentBatchDecodes(t *testing.T) {
	vals := [][]byte{[]byte("a"), make([]byte, 300), []byte("")}
	raw := IdempotentBatch(77, 3, 41, vals)
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if b.ProducerID != 77 || b.ProducerEpoch != 3 || b.FirstSequence != 41 || b.NumRecords != 3 || b.LastOffsetDelta != 2 || b.Magic != 2 {
		t.Fatalf("decoded header %+v", b)
	}
	if int(b.Length) != len(raw)-12 {
		t.Fatalf("Length %d, want %d", b.Length, len(raw)-12)
	}
	if got, want := uint32(b.CRC), crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Fatalf("CRC %x, want %x", got, want)
	}
	recs := b.Records
	for i, v := range vals {
		var r kmsg.Record
		n := readRecord(t, recs, &r)
		recs = recs[n:]
		if r.OffsetDelta != int32(i) || string(r.Value) != string(v) {
			t.Fatalf("record %d: delta %d value len %d", i, r.OffsetDelta, len(r.Value))
		}
	}
	if len(recs) != 0 {
		t.Fatalf("%d trailing bytes", len(recs))
	}
	if b.Attributes != 0 {
		t.Fatalf("idempotent batch attributes %#x, want 0", b.Attributes)
	}
	// The transactional one differs in the attribute bit only, under a
	// CRC that still matches.
	txn := TransactionalBatch(77, 3, 41, vals)
	var tb kmsg.RecordBatch
	if err := tb.ReadFrom(txn); err != nil {
		t.Fatal(err)
	}
	if tb.Attributes != 0x10 || tb.FirstSequence != 41 || tb.NumRecords != 3 {
		t.Fatalf("transactional batch header %+v", tb)
	}
	if got, want := uint32(tb.CRC), crc32.Checksum(txn[21:], crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Fatalf("transactional batch CRC %x, want %x", got, want)
	}
	// Negative control: a flipped byte no longer matches the CRC.
	raw[len(raw)-1] ^= 1
	if binary.BigEndian.Uint32(raw[17:]) == crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("CRC check does not catch a corrupted batch")
	}
}

// readRecord decodes one length-prefixed record and returns its size.
func readRecord(t *testing.T, b []byte, r *kmsg.Record) int {
	t.Helper()
	l, n := binary.Varint(b)
	if n <= 0 || int(l)+n > len(b) {
		t.Fatalf("bad record length prefix")
	}
	if err := r.ReadFrom(b[:n+int(l)]); err != nil {
		t.Fatal(err)
	}
	return n + int(l)
}

func recs(p int32, vals ...string) []*kgo.Record {
	out := make([]*kgo.Record, len(vals))
	for i, v := range vals {
		out[i] = &kgo.Record{Partition: p, Offset: int64(i), Value: []byte(v)}
	}
	return out
}

func bs(vals ...string) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out
}

const perfOutput = `49981 records sent, 9996.2 records/sec (0.95 MB/sec), 7.2 ms avg latency, 410.0 ms max latency.
100000 records sent, 19920.318725 records/sec (1.90 MB/sec), 5.43 ms avg latency, 410.00 ms max latency, 3 ms 50th, 12 ms 95th, 40 ms 99th, 402 ms 99.9th.
`

func TestParsePerfSummary(t *testing.T) {
	s, err := ParsePerfSummary(perfOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := PerfSummary{
		Records: 100000, RecordsPerSec: 19920.318725, MBPerSec: 1.90,
		AvgLatency: 5430 * time.Microsecond, MaxLatency: 410 * time.Millisecond,
		P50: 3 * time.Millisecond, P95: 12 * time.Millisecond, P99: 40 * time.Millisecond, P999: 402 * time.Millisecond,
	}
	if s != want {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
	// KIP-1052 warm-up runs print a steady-state line after the whole-run
	// one; the whole run is the one we report.
	warm := perfOutput + "90000 steady state records sent, 20000.000000 records/sec (1.91 MB/sec), 5.00 ms avg latency, 30.00 ms max latency, 3 ms 50th, 11 ms 95th, 20 ms 99th, 29 ms 99.9th.\n"
	if s2, err := ParsePerfSummary(warm); err != nil || s2 != want {
		t.Fatalf("with steady-state line: %+v, %v", s2, err)
	}
	if _, err := ParsePerfSummary(strings.SplitN(perfOutput, "\n", 2)[0]); !errors.Is(err, ErrNoSummary) {
		t.Fatalf("progress line alone: %v, want ErrNoSummary", err)
	}
}

func TestParsePerfSteadyState(t *testing.T) {
	warm := perfOutput + "90000 steady state records sent, 20000.000000 records/sec (1.91 MB/sec), 5.00 ms avg latency, 30.00 ms max latency, 3 ms 50th, 11 ms 95th, 20 ms 99th, 29 ms 99.9th.\n"
	s, err := ParsePerfSteadyState(warm)
	require.NoError(t, err)
	assert.Equal(t, PerfSummary{
		Records: 90000, Qualifier: " steady state", RecordsPerSec: 20000, MBPerSec: 1.91,
		AvgLatency: 5 * time.Millisecond, MaxLatency: 30 * time.Millisecond,
		P50: 3 * time.Millisecond, P95: 11 * time.Millisecond, P99: 20 * time.Millisecond, P999: 29 * time.Millisecond,
	}, s)
	_, err = ParsePerfSteadyState(perfOutput)
	assert.ErrorIs(t, err, ErrNoSummary, "a run without --warmup-records has no steady-state line")
}

func TestJavaPerfArgsWarmup(t *testing.T) {
	c := &Cluster{nodes: []*node{{directAddr: "127.0.0.1:9"}}}
	got := strings.Join(JavaPerf{Topic: "t", NumRecords: 10, RecordSize: 100, Throughput: 5, WarmupRecords: 4}.Args(c), " ")
	assert.Equal(t, "--topic t --num-records 10 --record-size 100 --throughput 5 --warmup-records 4 --producer-props acks=all bootstrap.servers=127.0.0.1:9 enable.idempotence=true", got,
		"--warmup-records goes before --producer-props, which takes every argument after it")
}

func TestJavaPerfArgs(t *testing.T) {
	c := &Cluster{nodes: []*node{{directAddr: "127.0.0.1:9"}}}
	got := strings.Join(JavaPerf{Topic: "t", NumRecords: 10, RecordSize: 100, Props: map[string]string{"linger.ms": "5", "acks": "1"}}.Args(c), " ")
	want := "--topic t --num-records 10 --record-size 100 --throughput -1 --producer-props acks=1 bootstrap.servers=127.0.0.1:9 enable.idempotence=true linger.ms=5"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
