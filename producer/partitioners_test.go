package producer

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// librdkafka's hash unit tests use the same key list for murmur2 and
// FNV-1a: whole strings and a string's tails, so that unaligned reads are
// covered (src/rdmurmur2.c unittest_murmur2, src/rdfnv1a.c unittest_fnv1a).
var librdkafkaKeys = []string{
	"kafka",
	"giberish123456789",
	"1234", "234", "34", "4",
	"PreAmbleWillBeRemoved,ThePrePartThatIs",
	"reAmbleWillBeRemoved,ThePrePartThatIs",
	"eAmbleWillBeRemoved,ThePrePartThatIs",
	"AmbleWillBeRemoved,ThePrePartThatIs",
	"",
}

// Expected values from librdkafka src/rdmurmur2.c (unittest_murmur2,
// java_murmur2_results: the Java client's values) and from sarama
// partitioner_test.go (TestMurmur2, also checked against Java).
func TestMurmur2MatchesLibrdkafkaAndSarama(t *testing.T) {
	librdkafka := []uint32{
		0xd067cf64, 0x8f552b0c, 0x9fc97b14, 0xe7c009ca, 0x873930da, 0x5a4b5ca1,
		0x78424f1c, 0x4a62b377, 0xe0e4e09e, 0x62b8b43f, 0x106e08d9,
	}
	for i, k := range librdkafkaKeys {
		assert.Equal(t, librdkafka[i], uint32(murmur2([]byte(k))), "murmur2(%q)", k)
	}
	sarama := map[string]uint32{"foo": 597841616, "bar": 988958145, "baz": 1973573280,
		"": 275646681, "kafka": 3496464228, "sarama": 770765511}
	for k, want := range sarama {
		assert.Equal(t, want, uint32(murmur2([]byte(k))), "murmur2(%q)", k)
	}
}

// Expected values from librdkafka src/rdfnv1a.c (unittest_fnv1a,
// golang_hashfnv_results): |int32(FNV-1a)|, the value librdkafka takes
// "to match the Sarama NewHashPartitioner implementation".
func TestFNV1aMatchesLibrdkafka(t *testing.T) {
	want := []int32{
		0xd33c4e1, 0x77a58295, 0x23bdd03, 0x2dea3cd2, 0x740fa83e, 0x310ca263,
		0x65cbd69c, 0x6e49c79a, 0x69eed356, 0x6abcc023, 0x7ee3623b,
	}
	for i, k := range librdkafkaKeys {
		h := int32(fnv1a([]byte(k)))
		if h < 0 {
			h = -h
		}
		assert.Equal(t, want[i], h, "|fnv1a(%q)|", k)
	}
}

// fnv1a is hash/fnv's New32a; sarama's NewHashPartitioner uses that.
func TestFNV1aIsHashFNV(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		k := make([]byte, r.IntN(40))
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		h := fnv.New32a()
		h.Write(k)
		require.Equal(t, h.Sum32(), fnv1a(k), "%x", k)
	}
}

// fnv1aPartition follows sarama's arithmetic (int32(h) % n, negated when
// negative); librdkafka computes |int32(h)| as uint32 % n. The issue asks
// whether the two agree bit for bit: they do, for every hash and count,
// which this checks against librdkafka's formula written out, including
// sarama's own edge case (TestHashPartitionerMinInt32: "1468509572224"
// hashes to 2147483648, math.MinInt32 as an int32).
func TestFNV1aPartitionSaramaEqualsLibrdkafka(t *testing.T) {
	librdkafka := func(key []byte, n int32) int32 {
		h := int32(fnv1a(key))
		if h < 0 && h != math.MinInt32 {
			h = -h // C's -INT32_MIN wraps to itself
		}
		return int32(uint32(h) % uint32(n))
	}
	require.Equal(t, uint32(1<<31), fnv1a([]byte("1468509572224")))
	assert.Equal(t, int32(48), fnv1aPartition([]byte("1468509572224"), 50)) // 2^31 mod 50
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		k := []byte(fmt.Sprint(r.Uint64()))
		n := 1 + r.Int32N(1000)
		got := fnv1aPartition(k, n)
		require.Equal(t, librdkafka(k, n), got, "key %s, %d partitions", k, n)
		require.True(t, got >= 0 && got < n)
	}
	// Control: without the negation sarama's arithmetic goes negative.
	neg := 0
	for i := range 1000 {
		if int32(fnv1a([]byte(fmt.Sprint(i))))%7 < 0 {
			neg++
		}
	}
	require.Positive(t, neg)
}

// Expected values from sarama partitioner_test.go
// (TestConsistentCRCHashPartitioner, 100 partitions), whose
// NewConsistentCRCHashPartitioner is documented as librdkafka's
// consistent_random for keyed records; librdkafka's consistent is
// rd_crc32(key) % partition_cnt (src/rdkafka_msg.c).
func TestConsistentMatchesSaramaCRC(t *testing.T) {
	cases := map[string]int32{
		"abc123def456":             57,
		"SheetJS":                  26, // crc32 2647669026: the signed modulo would give 70
		"9e8c7f4cf45857cfff7645d6": 24,
		"3900446192ff85a5f67da10c": 75,
		"0f4407b7a67d6d27de372198": 50,
	}
	for _, pt := range []Partitioner{ConsistentPartitioner(), ConsistentRandomPartitioner()} {
		for k, want := range cases {
			got, err := pt.Partition(&Record{Key: []byte(k)}, 100)
			require.NoError(t, err)
			assert.Equal(t, want, got, "%T %q", pt, k)
		}
	}
	require.Equal(t, uint32(2647669026), crc32.ChecksumIEEE([]byte("SheetJS")))
}

// Records without a key go to the sticky partition with every hash
// partitioner (librdkafka does so for all but random); an empty key is
// hashed, except by consistent_random, which librdkafka sends sticky when
// the key length is 0.
func TestHashPartitionersKeylessAndEmptyKey(t *testing.T) {
	nilKey, empty := &Record{}, &Record{Key: []byte{}}
	cases := []struct {
		pt        Partitioner
		wantEmpty int32
	}{
		{Murmur2Partitioner(), keyPartition(nil, 10)},
		{FNV1aPartitioner(), fnv1aPartition(nil, 10)},
		{ConsistentPartitioner(), 0}, // crc32("") = 0
		{ConsistentRandomPartitioner(), StickyPartition},
	}
	for _, tc := range cases {
		got, err := tc.pt.Partition(nilKey, 10)
		require.NoError(t, err)
		assert.Equal(t, StickyPartition, got, "%T nil key", tc.pt)
		got, err = tc.pt.Partition(empty, 10)
		require.NoError(t, err)
		assert.Equal(t, tc.wantEmpty, got, "%T empty key", tc.pt)
	}
	// Keyed records map by the hash, in range, for every count.
	for n := int32(1); n < 64; n++ {
		for _, k := range librdkafkaKeys[:10] {
			r := &Record{Key: []byte(k)}
			for _, tc := range cases {
				got, err := tc.pt.Partition(r, n)
				require.NoError(t, err)
				require.True(t, got >= 0 && got < n, "%T(%q, %d) = %d", tc.pt, k, n, got)
			}
			got, _ := Murmur2Partitioner().Partition(r, n)
			require.Equal(t, keyPartition(r.Key, n), got)
			got, _ = FNV1aPartitioner().Partition(r, n)
			require.Equal(t, fnv1aPartition(r.Key, n), got)
		}
	}
}

// Round robin counts per topic, keys ignored, and wraps when the count
// shrinks (a topic re-created with fewer partitions).
func TestRoundRobinPartitioner(t *testing.T) {
	rr := RoundRobinPartitioner()
	var a, b []int32
	for i := range 7 {
		p, err := rr.Partition(&Record{Topic: "a", Key: []byte("same")}, 3)
		require.NoError(t, err)
		a = append(a, p)
		if i < 4 {
			p, _ = rr.Partition(&Record{Topic: "b"}, 2)
			b = append(b, p)
		}
	}
	assert.Equal(t, []int32{0, 1, 2, 0, 1, 2, 0}, a)
	assert.Equal(t, []int32{0, 1, 0, 1}, b)
	p, _ := rr.Partition(&Record{Topic: "a"}, 3) // next is 1
	require.Equal(t, int32(1), p)
	p, _ = rr.Partition(&Record{Topic: "a"}, 1) // next would be 2: wraps
	require.Equal(t, int32(0), p)
}

func TestRandomAndManualPartitioners(t *testing.T) {
	seen := map[int32]int{}
	rnd := RandomPartitioner()
	for range 2000 {
		p, err := rnd.Partition(&Record{Key: []byte("same key")}, 8)
		require.NoError(t, err)
		require.True(t, p >= 0 && p < 8)
		seen[p]++
	}
	require.Len(t, seen, 8, "every partition chosen, keys ignored")

	_, err := ManualPartitioner().Partition(&Record{Key: []byte("k")}, 8)
	require.ErrorContains(t, err, "SetPartition")
}

// partitioner.class and partitioner select the built-ins by their Java and
// librdkafka names; the typed option overrides both; unknown names and the
// two properties together are refused naming the property.
func TestPartitionerProperties(t *testing.T) {
	resolve := func(opts ...Opt) (Partitioner, error) {
		c := defaultConfig()
		c.bootstrap = []string{"localhost:9092"}
		for _, o := range opts {
			if err := o.apply(&c); err != nil {
				return nil, err
			}
		}
		if err := c.validate(); err != nil {
			return nil, err
		}
		return c.partitioner, nil
	}
	cases := []struct {
		prop, value string
		want        Partitioner // nil: the default path
	}{
		{"partitioner.class", "", nil},
		{"partitioner.class", "org.apache.kafka.clients.producer.internals.DefaultPartitioner", nil},
		{"partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner", RoundRobinPartitioner()},
		{"partitioner.class", "org.apache.kafka.clients.producer.UniformStickyPartitioner", stickyOnly()},
		{"partitioner", "murmur2_random", nil},
		{"partitioner", "murmur2", nil},
		{"partitioner", "random", RandomPartitioner()},
		{"partitioner", "consistent", ConsistentPartitioner()},
		{"partitioner", "consistent_random", ConsistentRandomPartitioner()},
		{"partitioner", "fnv1a", FNV1aPartitioner()},
		{"partitioner", "fnv1a_random", FNV1aPartitioner()},
	}
	for _, tc := range cases {
		got, err := resolve(Property(tc.prop, tc.value))
		require.NoError(t, err, "%s=%s", tc.prop, tc.value)
		assert.Equal(t, reflect.TypeOf(tc.want), reflect.TypeOf(got), "%s=%s", tc.prop, tc.value)
		assert.Equal(t, tc.want, got, "%s=%s", tc.prop, tc.value)
	}
	for _, bad := range [][2]string{{"partitioner.class", "com.example.MyPartitioner"}, {"partitioner", "crc32"}} {
		_, err := resolve(Property(bad[0], bad[1]))
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, bad)
		assert.Equal(t, bad[0], ce.Property)
		assert.Contains(t, err.Error(), "RecordPartitioner")
	}
	_, err := resolve(Property("partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner"), Property("partitioner", "fnv1a"))
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "set only one")

	got, err := resolve(Property("partitioner", "fnv1a"), RecordPartitioner(ManualPartitioner()))
	require.NoError(t, err)
	require.Equal(t, ManualPartitioner(), got, "the typed option wins")
	got, err = resolve(Property("partitioner", "fnv1a"), RecordPartitioner(nil))
	require.NoError(t, err)
	require.Equal(t, FNV1aPartitioner(), got, "RecordPartitioner(nil) is not passing it")
}

// recordLedger collects each record's outcome and partition.
type recordLedger struct {
	mu   sync.Mutex
	wg   sync.WaitGroup
	errs map[string]error
	part map[string]int32
}

func newRecordLedger() *recordLedger {
	return &recordLedger{errs: map[string]error{}, part: map[string]int32{}}
}

func (l *recordLedger) produce(p *Producer, r *Record) {
	l.wg.Add(1)
	key := string(r.Value)
	p.Produce(context.Background(), r, func(r *Record, err error) {
		l.mu.Lock()
		if _, dup := l.errs[key]; dup {
			panic("second callback for " + key)
		}
		l.errs[key], l.part[key] = err, r.Partition()
		l.mu.Unlock()
		l.wg.Done()
	})
}

func (l *recordLedger) wait(t *testing.T) {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("callbacks missing")
	}
}

// Every built-in and a custom partitioner through the producer: keyed
// records land on the partition the partitioner chose (read back from the
// broker's logs), keyless records of the hash partitioners share sticky
// batches, and records produced before the topic's partitions were known
// are placed the same way.
func TestPartitionersEndToEnd(t *testing.T) {
	cases := []struct {
		name string
		pt   func() Partitioner
	}{
		{"murmur2", Murmur2Partitioner},
		{"fnv1a", FNV1aPartitioner},
		{"consistent", ConsistentPartitioner},
		{"consistent_random", ConsistentRandomPartitioner},
		{"round robin", RoundRobinPartitioner},
		{"random", RandomPartitioner},
		{"custom", func() Partitioner {
			return PartitionerFunc(func(r *Record, n int32) (int32, error) { return int32(len(r.Key)) % n, nil })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 10 * time.Millisecond,
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 5, Window: 10}}})
				p := memProducer(t, c, n, RecordPartitioner(tc.pt()), BatchSize(4096), Linger(20*time.Millisecond))
				l := newRecordLedger()
				// The first records wait for metadata, the later ones are placed at once.
				for i := range 300 {
					r := &Record{Topic: "t", Value: fmt.Appendf(nil, "k%d", i), Key: fmt.Appendf(nil, "key-%d", i)}
					if i%3 == 0 {
						r.Key = nil
					}
					l.produce(p, r)
					if i == 20 {
						time.Sleep(100 * time.Millisecond)
					}
				}
				l.wait(t)
				perPart := map[int32]int{}
				for key, err := range l.errs {
					require.NoError(t, err, key)
					perPart[l.part[key]]++
				}
				keyedOn := map[string]int32{}
				for part := range int32(5) {
					for _, r := range c.Records("t", part) {
						require.Equal(t, part, l.part[string(r.Value)], "record %s in the log of %d", r.Value, part)
						if r.Key != nil {
							keyedOn[string(r.Key)] = part
						}
					}
				}
				require.Len(t, keyedOn, 200, "every keyed record in a log")
				check := tc.pt() // a fresh value: round robin's order is checked apart
				for k, part := range keyedOn {
					switch tc.name {
					case "round robin", "random":
					default:
						want, err := check.Partition(&Record{Topic: "t", Key: []byte(k)}, 5)
						require.NoError(t, err)
						require.Equal(t, want, part, "key %s", k)
					}
				}
				// Keyless records produced without a pause in between (after
				// metadata): sticky for the hash partitioners, which move on
				// only after batch.size bytes; spread for round robin and random.
				keyless := map[int32]bool{}
				for i := 21; i < 300; i += 3 {
					keyless[l.part[fmt.Sprintf("k%d", i)]] = true
				}
				switch tc.name {
				case "round robin", "random":
					require.Len(t, perPart, 5, "spread over all partitions: %v", perPart)
					require.Greater(t, len(keyless), 2, "keyless records spread")
				case "custom":
				default:
					require.LessOrEqual(t, len(keyless), 2, "keyless records stick to a partition until batch.size bytes: %v", keyless)
				}
			})
		})
	}
}

// Round robin goes through the partitions in order, one record each, for
// records placed at once and those that waited for metadata alike.
func TestRoundRobinEndToEndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 10}}})
		p := memProducer(t, c, n, Property("partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner"))
		var got []int32
		for i := range 9 {
			r := &Record{Topic: "t", Key: []byte("same"), Value: fmt.Appendf(nil, "%d", i)}
			p.Produce(context.Background(), r, func(r *Record, err error) {
				// Not require: FailNow would end the callback goroutine,
				// and Close would wait for it.
				assert.NoError(t, err)
				got = append(got, r.Partition()) // callbacks run one at a time
			})
		}
		require.NoError(t, p.Flush(context.Background()))
		counts := map[int32]int{}
		for _, x := range got {
			counts[x]++
		}
		require.Equal(t, map[int32]int{0: 3, 1: 3, 2: 3}, counts)
		for part := range int32(3) {
			for i, r := range c.Records("t", part) {
				require.Equal(t, fmt.Sprint(int(part)+3*i), string(r.Value), "partition %d", part)
			}
		}
	})
}

// A custom partitioner that returns a partition the topic does not have,
// or an error, fails that record alone through its callback with
// ErrInvalidRecord naming what it returned; records the partitioner placed
// well are delivered. This holds for records placed at Produce and for
// those that waited for the topic's partitions. ManualPartitioner fails
// records without SetPartition the same way and delivers those with it.
func TestBadPartitionerFailsRecordNotProducer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 10}}})
		bad := PartitionerFunc(func(r *Record, n int32) (int32, error) {
			switch string(r.Key) {
			case "high":
				return n, nil
			case "negative":
				return -2, nil
			case "error":
				return 0, errors.New("no partition for this key")
			case "sticky":
				return StickyPartition, nil
			}
			return 1, nil
		})
		p := memProducer(t, c, n, RecordPartitioner(bad))
		l := newRecordLedger()
		for round := range 2 { // round 0 waits for metadata, round 1 does not
			for _, k := range []string{"high", "negative", "error", "sticky", "good"} {
				l.produce(p, &Record{Topic: "t", Key: []byte(k), Value: fmt.Appendf(nil, "%s-%d", k, round)})
			}
			l.wait(t)
		}
		for round := range 2 {
			v := func(k string) string { return fmt.Sprintf("%s-%d", k, round) }
			require.ErrorIs(t, l.errs[v("high")], ErrInvalidRecord)
			require.ErrorContains(t, l.errs[v("high")], "returned partition 3; topic t has partitions 0..2")
			require.ErrorIs(t, l.errs[v("negative")], ErrInvalidRecord)
			require.ErrorContains(t, l.errs[v("negative")], "returned partition -2")
			require.ErrorIs(t, l.errs[v("error")], ErrInvalidRecord)
			require.ErrorContains(t, l.errs[v("error")], "no partition for this key")
			require.NoError(t, l.errs[v("sticky")])
			require.NoError(t, l.errs[v("good")])
			require.Equal(t, int32(1), l.part[v("good")])
		}
		var logged []string
		for part := range int32(3) {
			for _, r := range c.Records("t", part) {
				logged = append(logged, string(r.Value))
			}
		}
		require.ElementsMatch(t, []string{"sticky-0", "good-0", "sticky-1", "good-1"}, logged)

		m := memProducer(t, c, n, RecordPartitioner(ManualPartitioner()))
		without := &Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}
		require.ErrorIs(t, m.ProduceSync(context.Background(), without).FirstErr(), ErrInvalidRecord)
		with := &Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}
		with.SetPartition(2)
		require.NoError(t, m.ProduceSync(context.Background(), with).FirstErr())
		require.Equal(t, int32(2), with.Partition())
	})
}

// ErrPartitionGone holds whichever partitioner placed the records: records
// placed on a partition of a topic that is then re-created with fewer
// partitions fail with ErrPartitionGone naming it, the others are
// delivered, and records produced afterwards map over the new count.
func TestPartitionGoneForEveryPartitioner(t *testing.T) {
	cases := map[string]func() Partitioner{
		"murmur2":     Murmur2Partitioner,
		"fnv1a":       FNV1aPartitioner,
		"consistent":  ConsistentPartitioner,
		"round robin": RoundRobinPartitioner,
		"custom": func() Partitioner {
			return PartitionerFunc(func(r *Record, n int32) (int32, error) { return int32(len(r.Value)) % n, nil })
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond,
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 4, Window: 20}}})
				p := memProducer(t, c, n, RecordPartitioner(mk()))
				warm := newRecordLedger()
				for i := range 40 {
					warm.produce(p, &Record{Topic: "t", Key: fmt.Appendf(nil, "w%d", i), Value: fmt.Appendf(nil, "warm%d", i)})
				}
				warm.wait(t)

				_, err := c.DeleteTopic("t")
				require.NoError(t, err)
				waiting := newRecordLedger()
				for i := range 200 {
					waiting.produce(p, &Record{Topic: "t", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "waiting%d", i)})
				}
				time.Sleep(200 * time.Millisecond)
				require.NoError(t, c.CreateTopic(broker.TopicConfig{Name: "t", Partitions: 2, Window: 20}))
				waiting.wait(t)
				gone, kept := 0, 0
				for key, err := range waiting.errs {
					if part := waiting.part[key]; part >= 2 {
						gone++
						require.ErrorIs(t, err, ErrPartitionGone, key)
						var de *DeliveryError
						require.ErrorAs(t, err, &de)
						require.Equal(t, part, de.Partition)
						continue
					}
					kept++
					require.NoError(t, err, key)
				}
				require.Positive(t, gone)
				require.Positive(t, kept)

				after := newRecordLedger()
				for i := range 50 {
					after.produce(p, &Record{Topic: "t", Key: fmt.Appendf(nil, "a%d", i), Value: fmt.Appendf(nil, "after%d", i)})
				}
				after.wait(t)
				for key, err := range after.errs {
					require.NoError(t, err, key)
					require.Less(t, after.part[key], int32(2))
				}
			})
		})
	}
}

// The partitioner runs once per record on Produce's path: none of the
// built-ins allocates.
func TestPartitionersDoNotAllocate(t *testing.T) {
	r := &Record{Topic: "t", Key: []byte("some-key")}
	for _, pt := range []Partitioner{Murmur2Partitioner(), FNV1aPartitioner(), ConsistentPartitioner(),
		ConsistentRandomPartitioner(), RoundRobinPartitioner(), RandomPartitioner()} {
		pt.Partition(r, 10) // round robin's first call adds the topic
		allocs := testing.AllocsPerRun(100, func() { pt.Partition(r, 10) })
		assert.Zero(t, allocs, "%T", pt)
	}
}

// BenchmarkPartitioners is the cost of choosing a partition for a 16-byte
// key, by partitioner; "default" is the path taken without RecordPartitioner.
//
//	go test -run '^$' -bench BenchmarkPartitioners ./producer
func BenchmarkPartitioners(b *testing.B) {
	key := []byte("user-0123456789a")
	r := &Record{Topic: "t", Key: key}
	b.Run("default", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			keyPartition(r.Key, 12)
		}
	})
	for name, pt := range map[string]Partitioner{"murmur2": Murmur2Partitioner(), "fnv1a": FNV1aPartitioner(),
		"consistent": ConsistentPartitioner(), "roundrobin": RoundRobinPartitioner()} {
		ts := &topicBuf{name: "t", ts: &topicState{name: "t"}, sticky: stickyPartitioner{current: -1, rand: randomSources().part}}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_, _, _ = placeWith(pt, ts, r, 12, nil)
			}
		})
	}
}

// partitioner.ignore.keys has no effect with a partitioner chosen by
// RecordPartitioner (as in the Java client with a custom one): keyed
// records go where it says. Control: without it, the same property sends
// them all to the sticky partition.
func TestIgnoreKeysOnlyForDefaultPartitioner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 6, Window: 10}}})
		produce := func(p *Producer) map[int32]bool {
			used := map[int32]bool{}
			var rs []*Record
			for i := range 60 {
				rs = append(rs, &Record{Topic: "t", Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("v")})
			}
			require.NoError(t, p.ProduceSync(context.Background(), rs...).FirstErr())
			for _, r := range rs {
				used[r.Partition()] = true
				if want, _ := FNV1aPartitioner().Partition(r, 6); p.cfg.partitioner != nil {
					require.Equal(t, want, r.Partition(), "key %s", r.Key)
				}
			}
			return used
		}
		withFNV := produce(memProducer(t, c, n, Property("partitioner.ignore.keys", "true"), RecordPartitioner(FNV1aPartitioner())))
		require.Greater(t, len(withFNV), 3)
		plain := produce(memProducer(t, c, n, Property("partitioner.ignore.keys", "true"), BatchSize(1<<20)))
		require.Len(t, plain, 1, "keys ignored by the default partitioner")
	})
}

// Keyless records produced one at a time, each batch sealed by linger with
// one record, stay on their sticky partition until batch.size bytes have
// gone to it (KIP-794), then move: 40 records of about 210 bytes with
// batch.size 1024 make 6 to 9 runs. Before, every linger seal moved the
// partition (40 runs).
func TestStickyPartitionIgnoresLingerSeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 6, Window: 10}}})
		p := memProducer(t, c, n, BatchSize(1024))
		var parts []int32
		for range 40 {
			r := &Record{Topic: "t", Value: make([]byte, 200)}
			require.NoError(t, p.ProduceSync(context.Background(), r).FirstErr())
			parts = append(parts, r.Partition())
		}
		runs := 1
		for i := 1; i < len(parts); i++ {
			if parts[i] != parts[i-1] {
				runs++
			}
		}
		require.GreaterOrEqual(t, runs, 6, "moves on after batch.size bytes: %v", parts)
		require.LessOrEqual(t, runs, 9, "a linger seal moved the partition: %v", parts)
	})
}

// keylessRecordsPerBatch produces 3,000 keyless 100-byte records at once
// to 1,000 partitions (so the sticky partition seldom comes back to one it
// left) and returns records per batch sent.
func keylessRecordsPerBatch(t *testing.T, leftover bool) float64 {
	var perBatch float64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1000, Window: 5}}})
		p := memProducer(t, c, n, BatchSize(16384), BufferMemory(64<<20), Linger(5*time.Millisecond),
			bug(t, stickyLeftover, leftover))
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("metadata")}).FirstErr())
		before := p.Stats().BatchesSent
		const records = 3000
		value := make([]byte, 100)
		for range records {
			p.Produce(t.Context(), &Record{Topic: "t", Value: value}, nil)
		}
		require.NoError(t, p.Flush(t.Context()))
		perBatch = records / float64(p.Stats().BatchesSent-before)
	})
	return perBatch
}

// Keyless records fill their batches: when the sticky partition's batch is
// full, the record that did not fit opens a batch on the next partition
// (about 149 records of 100 bytes per 16 KiB batch). Negative control
// (stickyLeftover): it opened a one-record batch on the old partition,
// left to linger, so every other batch carried one record.
func TestKeylessBatchesFill(t *testing.T) {
	require.Greater(t, keylessRecordsPerBatch(t, false), 130.0)
	if !regressBuild {
		return // the negative control below needs -tags longhaul_regress
	}
	require.Less(t, keylessRecordsPerBatch(t, true), 100.0)
}

// keylessAroundBackedUpPartitions builds unequal queues and places keyless
// records around them: of 4 partitions, 1 and 3 are led by a node that
// stalls, and 100 records (25 batches) wait for each of them, 5 in flight
// (the window) and the rest queued; partitions 0 and 2, on the other node,
// have nothing queued. Then 40 batches' worth of keyless records are
// produced, a batch's worth each millisecond (the sender drains 0 and 2
// meanwhile). It returns the queues the sticky partitioner saw and how
// many keyless records went to each partition, with
// partitioner.adaptive.partitioning.enable set to adaptive.
func keylessAroundBackedUpPartitions(t *testing.T, adaptive bool) (queued [4]int, placed [4]int) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
		p := memProducer(t, c, n, Property("partitioner.adaptive.partitioning.enable", strconv.FormatBool(adaptive)))
		for part := range int32(4) {
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", part, []byte("warm-up"))).FirstErr())
		}
		c.Stall(1, 300*time.Millisecond) // less than request.timeout.ms: nothing is retried
		ok := func(_ *Record, err error) { assert.NoError(t, err) }
		for range 100 {
			for _, part := range []int32{1, 3} {
				p.Produce(context.Background(), toPartition("t", part, make([]byte, 100)), ok)
			}
		}
		time.Sleep(5 * time.Millisecond) // sealed by linger and sent as far as the window allows
		p.acc.mu.Lock()
		for i, pb := range p.acc.topics["t"].bufs {
			queued[i] = pb.queued()
		}
		p.acc.mu.Unlock()
		var mu sync.Mutex
		for range 40 {
			for range 4 { // about batch.size (512) bytes
				p.Produce(context.Background(), &Record{Topic: "t", Value: make([]byte, 100)}, func(r *Record, err error) {
					assert.NoError(t, err)
					mu.Lock()
					placed[r.Partition()]++
					mu.Unlock()
				})
			}
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, p.Flush(context.Background()))
	})
	t.Logf("adaptive %v: queues %v, keyless records placed %v", adaptive, queued, placed)
	return queued, placed
}

// TestAdaptivePropertyChoosesByQueues: with
// partitioner.adaptive.partitioning.enable (the default, true) the sticky
// partitioner's next partition is chosen from the partitions' queues: with
// 20 batches queued on each of two partitions and none on the other two,
// keyless records go to the backed-up partitions at most until the first
// move (one batch's worth, if the first sticky partition, drawn at random,
// was one of them). The negative control turns the property off: the
// partitioner ignores the queues and moves uniformly, so about two moves in
// three from a partition without a queue land on a backed-up one.
func TestAdaptivePropertyChoosesByQueues(t *testing.T) {
	def, _ := PropertyDefault("partitioner.adaptive.partitioning.enable")
	require.Equal(t, "true", def)
	queued, placed := keylessAroundBackedUpPartitions(t, true)
	require.GreaterOrEqual(t, queued[1], 15, "queued on a stalled partition")
	require.GreaterOrEqual(t, queued[3], 15, "queued on a stalled partition")
	require.Zero(t, queued[0]+queued[2], "queued on the others")
	require.Equal(t, 160, placed[0]+placed[1]+placed[2]+placed[3])
	require.LessOrEqual(t, placed[1]+placed[3], 8, "keyless records on backed-up partitions: %v", placed)
}

func TestAdaptivePropertyChoosesByQueuesNegativeControl(t *testing.T) {
	queued, placed := keylessAroundBackedUpPartitions(t, false)
	require.GreaterOrEqual(t, queued[1]+queued[3], 30, "the same queues")
	// Two moves to backed-up partitions out of about twenty, where each
	// move has one chance in three or more to go to one: the assertion
	// of TestAdaptivePropertyChoosesByQueues fails.
	require.Greater(t, placed[1]+placed[3], 8, "keyless records on backed-up partitions: %v", placed)
}

// TestPartitionerPanicFailsRecordAlone: Partitioner's contract says a
// partition it cannot give fails that record alone, and the producer goes
// on. A Partition call that panics is such a case. Partition runs with
// acc.mu held, from Produce and (for records that waited for their
// topic's partitions) from the sender goroutine: the panic left the lock
// held, so after an HTTP server or any caller recovered it every Produce,
// Stats and Close blocked for good, and on the sender goroutine it ended
// the program. Now the record fails with ErrInvalidRecord naming the
// panic, through its callback, on both paths.
func TestPartitionerPanicFailsRecordAlone(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}, {Name: "late", Partitions: 2}}})
	pt := PartitionerFunc(func(r *Record, n int32) (int32, error) {
		if string(r.Key) == "boom" {
			panic("partitioner bug")
		}
		return 1, nil
	})
	p, err := New(BootstrapServers(c.Addr()), Linger(time.Millisecond), RecordPartitioner(pt))
	require.NoError(t, err)

	// Records to "late" wait for its partitions, so the sender goroutine
	// places them; the producer learns "t" first.
	require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr())

	type outcome struct {
		rs        ProduceResults
		recovered any
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			o.recovered = recover()
			done <- o
		}()
		o.rs = p.ProduceSync(context.Background(),
			&Record{Topic: "t", Key: []byte("boom"), Value: []byte("1")},
			&Record{Topic: "t", Key: []byte("fine"), Value: []byte("2")},
			&Record{Topic: "late", Key: []byte("boom"), Value: []byte("3")},
			&Record{Topic: "late", Key: []byte("fine"), Value: []byte("4")},
		)
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ProduceSync is stuck (acc.mu left held by the panic?)")
	}
	require.Nil(t, o.recovered, "the partitioner's panic reached Produce's caller")
	require.Len(t, o.rs, 4)
	for _, i := range []int{0, 2} {
		err := o.rs[i].Err
		assert.ErrorIs(t, err, ErrInvalidRecord, "record %d", i)
		assert.ErrorContains(t, err, "partitioner bug", "record %d", i)
		assert.Equal(t, int64(-1), o.rs[i].Record.Offset)
	}
	for _, i := range []int{1, 3} {
		require.NoError(t, o.rs[i].Err, "record %d", i)
		assert.Equal(t, int32(1), o.rs[i].Record.Partition())
	}
	assert.Len(t, c.Records("t", 1), 2) // warm and 2: the panicking record was not written
	assert.Len(t, c.Records("late", 1), 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
