package producer

import (
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Hashes computed by the Java client's org.apache.kafka.common.utils.Utils.murmur2
// (the values in Kafka's own UtilsTest).
func TestMurmur2MatchesJava(t *testing.T) {
	cases := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, tc := range cases {
		if got := murmur2([]byte(tc.in)); got != tc.want {
			t.Errorf("murmur2(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestKeyPartitionIsStableAndInRange(t *testing.T) {
	for n := int32(1); n < 50; n++ {
		for _, k := range []string{"", "a", "key-1", "\xff\xfe"} {
			p := keyPartition([]byte(k), n)
			if p < 0 || p >= n || p != keyPartition([]byte(k), n) {
				t.Fatalf("keyPartition(%q, %d) = %d", k, n, p)
			}
		}
	}
}

func TestStickyMovesOnlyWhenFull(t *testing.T) {
	s := stickyPartitioner{current: -1, rand: randomSources().part}
	first := s.pick(8, nil)
	for range 10 {
		if s.pick(8, nil) != first {
			t.Fatal("sticky partition changed without a full batch")
		}
	}
	s.move(8, nil, nil)
	if s.pick(8, nil) == first {
		t.Fatal("sticky partition did not move after its batch filled")
	}
	one := stickyPartitioner{current: -1, rand: randomSources().part}
	one.pick(1, nil)
	one.move(1, nil, nil)
	if one.pick(1, nil) != 0 {
		t.Fatal("single partition topic must stay on 0")
	}
}

// placed moves on after batch.size bytes at a batch boundary, and at twice
// batch.size whatever the batch; never before batch.size, even when a
// batch was sealed full (by keyed records already in it).
func TestStickyMovesAfterBatchSizeBytes(t *testing.T) {
	s := stickyPartitioner{current: 3, rand: randomSources().part}
	require.False(t, s.placed(900, 1000, true), "a full seal before batch.size bytes went to the partition")
	require.False(t, s.placed(99, 1000, false))
	require.True(t, s.placed(1, 1000, true), "batch.size bytes and a full batch")
	s.move(8, nil, nil)
	require.Zero(t, s.produced, "a move starts the count again")
	for range 19 {
		require.False(t, s.placed(100, 1000, false), "partial batches below twice batch.size")
	}
	require.True(t, s.placed(100, 1000, false), "twice batch.size moves on whatever the batch")
}

func TestAdaptiveStickyAvoidsQueuedPartitions(t *testing.T) {
	queued := []int{3, 0, 5, 2, 7, 1, 4, 6}
	for range 50 {
		s := stickyPartitioner{current: 1, rand: randomSources().part}
		s.move(8, func(p int32) int { return queued[p] }, nil)
		// Partition 1 (the full one) is left; the least queued of the rest is 5.
		if s.current != 5 {
			t.Fatalf("adaptive choice %d, want 5 (fewest queued batches)", s.current)
		}
	}
	// Control: without queue sizes the choice is spread out.
	seen := map[int32]bool{}
	for range 200 {
		s := stickyPartitioner{current: 1, rand: randomSources().part}
		s.move(8, nil, nil)
		seen[s.current] = true
	}
	if len(seen) < 5 {
		t.Errorf("uniform choice used only %v", seen)
	}
}

// TestAdaptiveStickyDoesNotScanLargeTopics: with 10,000 partitions the
// adaptive choice looks at a handful of partitions, not all of them (issue
// 20: the scan ran under the producer's lock on every sealed batch), and
// still steers away from backed-up partitions.
func TestAdaptiveStickyDoesNotScanLargeTopics(t *testing.T) {
	const n = 10000
	looked := 0
	backedUp := 0
	for range 1000 {
		s := stickyPartitioner{current: 7, rand: randomSources().part}
		s.move(n, func(p int32) int {
			looked++
			if p%2 == 0 {
				return 10 // half the partitions have a queue
			}
			return 0
		}, nil)
		require.NotEqual(t, int32(7), s.current)
		if s.current%2 == 0 {
			backedUp++
		}
	}
	require.LessOrEqual(t, looked, 1000*adaptiveSamples, "queue sizes read per choice")
	// A random choice would land on a backed-up partition half the time;
	// eight samples land there about once in 256.
	require.Less(t, backedUp, 50, "choices of a backed-up partition out of 1000")
}

// Keyless records avoid partitions without a leader (KIP-794's
// availablePartitionsForTopic in the Java client).

// TestKeylessAvoidsLeaderless: metadata names no leader for partitions 0,
// 2 and 4 of six; every keyless record goes to 1, 3 or 5 (placed on a
// partition without a leader it would wait there until delivery.timeout.ms),
// the sticky partition still moving among them. The negative control, the
// same records with every leader named, reaches the even partitions.
func TestKeylessAvoidsLeaderless(t *testing.T) {
	for _, leaderless := range []bool{true, false} {
		c, err := broker.Start(broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 6}}})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		if leaderless {
			c.RewriteMetadata(func(r *kmsg.MetadataResponse) {
				for i := range r.Topics {
					for j := range r.Topics[i].Partitions {
						if pm := &r.Topics[i].Partitions[j]; pm.Partition%2 == 0 {
							pm.Leader, pm.ErrorCode = -1, 5 // LEADER_NOT_AVAILABLE
						}
					}
				}
			})
		}
		p := newTestProducer(t, c, BatchSize(1000))
		got := keylessPartitions(t, p, 20)
		even := 0
		for part, n := range got {
			if part%2 == 0 {
				even += n
			}
		}
		if leaderless {
			require.Zero(t, even, "records on partitions without a leader: %v", got)
			require.Greater(t, len(got), 1, "the sticky partition moves among the led ones: %v", got)
		} else {
			require.NotZero(t, even, "negative control: %v", got)
		}
	}
}
