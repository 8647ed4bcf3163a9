package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTopicParts: partitions spread over topics as evenly as they go, the
// first ones taking the remainder, and nothing lost.
func TestTopicParts(t *testing.T) {
	assert.Equal(t, []int{16}, topicParts(16, 1))
	assert.Equal(t, []int{3, 2, 2}, topicParts(7, 3))
	assert.Equal(t, []int{1, 1, 1, 1}, topicParts(4, 4))
	for _, c := range [][2]int{{1000, 100}, {10000, 100}, {1001, 100}, {10, 7}} {
		parts := topicParts(c[0], c[1])
		require.Len(t, parts, c[1])
		sum := 0
		for _, n := range parts {
			sum += n
			assert.LessOrEqual(t, parts[0]-n, 1, "%v: uneven %v", c, parts)
		}
		assert.Equal(t, c[0], sum, "%v", c)
	}
	one := brokerSpec{topic: "bench", partitions: 5}.topicList("bench-3")
	assert.Equal(t, []topicSpec{{"bench-3", 5}}, one, "one topic keeps the case's name")
	three := brokerSpec{topic: "bench", topics: 3, partitions: 7}.topicList("bench-4")
	assert.Equal(t, []topicSpec{{"bench-4-0", 3}, {"bench-4-1", 2}, {"bench-4-2", 2}}, three)
}

func TestTopicsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--topics", "0"},
		{"--topics", "17", "--partitions", "16"},
		{"--topics", "2", "--partitions", "1,16"}, // checked against every count
		{"--target", "kafka", "--topics", "2", "--clients", "lh-w5,java"},
		{"--kafka-config", "a=1"},                          // embedded target
		{"--target", "kafka", "--kafka-config", "a"},       // no value
		{"--target", "kafka", "--kafka-config", "a=1,a=2"}, // twice
	} {
		var out, errw bytes.Buffer
		assert.Equal(t, 2, run(context.Background(), args, &out, &errw), "run %q, stderr %q", args, errw.String())
	}
	o, err := parseFlags([]string{"--target", "kafka", "--topics", "100", "--partitions", "1000,10000"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 100, o.topics)
	assert.Nil(t, o.kafkaConfig)
	o2, err := parseFlags([]string{"--target", "kafka-stock", "--kafka-config", "log.index.size.max.bytes=262144, num.io.threads=4"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"log.index.size.max.bytes": "262144", "num.io.threads": "4"}, o2.kafkaConfig)
	for _, k := range o.clients {
		assert.False(t, k.java, "with --topics > 1 java is not among the default clients")
	}
}

// TestTopicsSpreadRecords: with --topics, the embedded broker has every
// topic with its share of the partitions, and both clients, keyed and
// keyless, write records to every topic (without the spreading, all would
// go to the first and the wait below would time out).
func TestTopicsSpreadRecords(t *testing.T) {
	bs, err := newBrokerStarter("inproc", t.TempDir())
	require.NoError(t, err)
	for _, k := range []clientKind{{name: "lh-w5", window: 5}, {name: "kgo", window: 50, kgo: true}} {
		for _, keyed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keyed=%v", k.name, keyed), func(t *testing.T) {
				b, err := bs.start(brokerSpec{topic: "bench", topics: 3, partitions: 7, window: k.window})
				require.NoError(t, err)
				defer b.stop()
				cfg := clientConfig{addr: b.addr, topics: topicNames(b.topics), recordSize: 10, batchSize: 16384,
					linger: time.Millisecond, bufferBytes: 1 << 20, maxInFlight: 5, keyed: keyed}
				var loop produceLoop
				if k.kgo {
					loop, err = newKgo(cfg)
				} else {
					loop, err = newLonghaul(cfg, k)
				}
				require.NoError(t, err)
				st := new(caseState)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); loop.run(ctx, st) }()
				// Until every topic holds records (a client may buffer a
				// topic's records until it has its metadata), then stop.
				count := func(ts topicSpec) int {
					n := 0
					for p := range ts.partitions {
						n += len(b.inner.Records(ts.name, int32(p)))
					}
					return n
				}
				require.Eventually(t, func() bool {
					for _, ts := range b.topics {
						if count(ts) < 100 {
							return false
						}
					}
					return true
				}, 30*time.Second, 10*time.Millisecond, "every topic gets records")
				st.stopping.Store(true)
				cancel()
				<-done
				fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
				loop.flush(fctx)
				fcancel()
				loop.close()
				require.Zero(t, st.failed.Load())

				require.Equal(t, []topicSpec{{"bench-0", 3}, {"bench-1", 2}, {"bench-2", 2}}, b.topics)
				var total int
				for _, ts := range b.topics {
					total += count(ts)
				}
				assert.GreaterOrEqual(t, int64(total), st.acked(), "every acknowledged record is in one of the topics")
			})
		}
	}
}

// TestOpenFiles: the count the Kafka target waits on follows the files a
// process holds open, and is -1 for a process that does not exist.
func TestOpenFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before := openFiles(os.Getpid())
	require.Positive(t, before)
	var fs []*os.File
	for range 5 {
		f, err := os.Open(os.Args[0])
		require.NoError(t, err)
		fs = append(fs, f)
	}
	assert.Equal(t, before+5, openFiles(os.Getpid()))
	for _, f := range fs {
		f.Close()
	}
	assert.Equal(t, before, openFiles(os.Getpid()))
	assert.Equal(t, -1, openFiles(1<<30))
}

// TestSplitClient checks lh-w50x2: two producers deal the partitions out
// in turn, both send, records reach every partition, and the combined
// pipeline trace only grows (pipeBetween slices it by count).
func TestSplitClient(t *testing.T) {
	bs, err := newBrokerStarter("inproc", t.TempDir())
	require.NoError(t, err)
	k := clientKind{name: "lh-w50x2", window: 50, split: 2}
	b, err := bs.start(brokerSpec{topic: "bench", topics: 1, partitions: 5, window: k.window})
	require.NoError(t, err)
	defer b.stop()
	cfg := clientConfig{addr: b.addr, topics: topicNames(b.topics), recordSize: 100, batchSize: 1024,
		linger: time.Millisecond, bufferBytes: 1 << 20, maxInFlight: 5, trace: true}
	loop, err := newSplitLonghaul(cfg, k, 5)
	require.NoError(t, err)
	require.Len(t, loop.loops, 2)
	assert.Equal(t, []int32{0, 2, 4}, loop.loops[0].cfg.onlyParts)
	assert.Equal(t, []int32{1, 3}, loop.loops[1].cfg.onlyParts)
	assert.Equal(t, int64(1<<19), loop.loops[1].cfg.bufferBytes, "each gets its share of the buffer")
	assert.Equal(t, uint64(8), loop.loops[0].perBatch, "(1024-61)/(100+12) records per partition in turn")

	st := new(caseState)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); loop.run(ctx, st) }()
	var snap0 pipeSnap
	var first []int32
	require.Eventually(t, func() bool {
		var resp []int32
		snap0, resp = loop.pipe()
		first = append(first[:0], resp[:snap0.responses]...)
		return snap0.responses > 0
	}, 30*time.Second, 10*time.Millisecond, "responses")
	require.Eventually(t, func() bool {
		for p := range 5 {
			if len(b.inner.Records("bench", int32(p))) < 100 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every partition gets records")
	st.stopping.Store(true)
	cancel()
	<-done
	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	loop.flush(fctx)
	fcancel()
	snap1, resp1 := loop.pipe()
	loop.close()
	require.Zero(t, st.failed.Load())
	for i, l := range loop.loops {
		assert.Positive(t, l.shape().records, "producer %d sent", i)
	}
	sh := loop.shape()
	assert.Equal(t, loop.loops[0].shape().records+loop.loops[1].shape().records, sh.records)
	assert.Greater(t, snap1.responses, snap0.responses)
	assert.Equal(t, first, resp1[:len(first)], "the merged response times only grow")
	assert.Equal(t, 5*50, snap1.limitSum, "the windows of both producers' partitions")
}
