package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression tests of issue 12 (producer safety under mixed faults), one
// per failure, on virtual time against the embedded broker on an in-memory
// network. Run them all with go test ./producer -run TestMixedFault.

// warmUp produces 200 records to each partition and waits for them, so
// the partitions learn the broker's window and open their gates.
func warmUp(t *testing.T, p *Producer, l *ledger, parts ...int32) {
	t.Helper()
	for _, part := range parts {
		l.produce(p, part, 200, 100)
	}
	require.True(t, l.waitAll(time.Minute), "warm-up callbacks")
	require.Empty(t, l.failures(), "warm-up")
}

// warmWindow20 starts a cluster of one topic "t" with parts partitions at
// window 20 over a 20 ms round trip, and a producer with opts whose
// ledger "a" has warmed every partition (warmUp).
func warmWindow20(t *testing.T, parts int32, opts ...Opt) (*broker.Cluster, *Producer, *ledger) {
	t.Helper()
	c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: parts, Window: 20}}})
	p := memProducer(t, c, n, opts...)
	l := newLedger("a", "t")
	all := make([]int32, parts)
	for i := range all {
		all[i] = int32(i)
	}
	warmUp(t, p, l, all...)
	return c, p, l
}

// requireClean fails on any violation checkOutcome finds.
func requireClean(t *testing.T, c *broker.Cluster, topic string, partitions int32, ls ...*ledger) {
	t.Helper()
	v := checkOutcome(collectOutcome(c, topic, partitions, ls...))
	require.Empty(t, v, "violations of the producer's promise")
}

// Issue 12, failure 1: after the broker expired our state (KIP-854), a
// burst's first batch A gets REQUEST_TIMED_OUT (maybe written) and the
// second C NOT_ENOUGH_REPLICAS (not written) while later batches are
// acked. C must not be written after its successors.
func TestMixedFaultExpiredStateTimeoutThenNotEnoughReplicasKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(0))
		require.Equal(t, 20, p.InFlightLimit("t", 0))
		c.ExpireProducerIDs()
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.RequestTimedOut.Code},
			broker.Answer{Code: kerr.NotEnoughReplicas.Code})
		l.produce(p, 0, 80, 100)
		require.True(t, l.waitAll(time.Minute), "callbacks")
		requireClean(t, c, "t", 1, l)
	})
}

// Issue 12, failure 2: INVALID_RECORD, NOT_ENOUGH_REPLICAS and
// REQUEST_TIMED_OUT on consecutive batches of partition 0 make the
// producer bump its epoch after resolving the maybe-written batch. The
// bump must happen promptly: partition 1's records must not wait for
// delivery.timeout.ms (6 s here).
func TestMixedFaultStalledBumpDoesNotBlockOtherPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 2, Linger(0))
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.InvalidRecord.Code},
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},
			broker.Answer{Code: kerr.RequestTimedOut.Code})
		l.produce(p, 0, 80, 100)
		time.Sleep(100 * time.Millisecond) // the first answers are in
		l1 := newLedger("b", "t")
		start := time.Now()
		l1.produce(p, 1, 10, 100)
		require.True(t, l1.waitAll(time.Minute), "partition 1 callbacks")
		took := time.Since(start)
		require.Empty(t, l1.failures(), "partition 1 has no fault")
		// One request timeout (1 s) resolves the in-doubt batch; the
		// bump itself is one round trip.
		require.Less(t, took, 3*time.Second, "partition 1 waited for partition 0's bump")
		require.True(t, l.waitAll(time.Minute), "partition 0 callbacks")
		requireClean(t, c, "t", 2, l, l1)
	})
}

// Issue 12, failure 3: a Kafka 2.4 broker (InitProducerId <= v2, no
// KIP-360) cannot bump an existing producer id. After INVALID_RECORD on a
// batch with later batches in flight (a sequence gap: a bump is needed) the
// producer must take a new producer id and later records must succeed.
func TestMixedFaultPreKIP360BrokerTakesNewProducerID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond, Kafka24Nodes: []int32{0},
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		p := memProducer(t, c, n)
		l := newLedger("a", "t")
		warmUp(t, p, l, 0, 1)
		pid := p.Stats().ProducerID
		c.InjectError("t", 0, kerr.InvalidRecord.Code, 1)
		l.produce(p, 0, 40, 100)
		require.True(t, l.waitAll(time.Minute))
		require.NotEmpty(t, l.failures(), "the injected INVALID_RECORD fails a batch")
		later := newLedger("b", "t")
		later.produce(p, 0, 40, 100)
		later.produce(p, 1, 40, 100)
		require.True(t, later.waitAll(time.Minute))
		require.Empty(t, firstN(later.failures(), 3), "records after the failure must succeed")
		require.NotEqual(t, pid, p.Stats().ProducerID, "a new producer id")
		requireClean(t, c, "t", 2, l, later)
	})
}

// Issue 12, failure 4: Kafka may answer NOT_LEADER_OR_FOLLOWER to a batch
// it appended (leadership lost while waiting for the ISR). When an epoch
// bump is requested in the same response (INVALID_PRODUCER_EPOCH on another
// partition), the batch must be resolved under the old epoch, not
// renumbered and written a second time.
func TestMixedFaultAppendedThenNotLeaderNotDuplicatedByBump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 2, Linger(5*time.Millisecond))
		c.ScriptAnswers("t", 0, broker.Answer{Code: kerr.NotLeaderForPartition.Code, Mode: broker.AppendThenFail})
		c.ScriptAnswers("t", 1, broker.Answer{Code: kerr.InvalidProducerEpoch.Code})
		l.produce(p, 0, 1, 100)
		l.produce(p, 1, 1, 100)
		require.True(t, l.waitAll(time.Minute))
		l.produce(p, 0, 20, 100)
		require.True(t, l.waitAll(time.Minute))
		require.Zero(t, c.PendingAnswers("t", 0)+c.PendingAnswers("t", 1), "both scripted answers used")
		require.NotZero(t, p.s.bumps.Load(), "the scenario needs an epoch bump")
		requireClean(t, c, "t", 2, l)
	})
}

// Issue 12, failure 5: a lost response leaves batch A waiting for
// request.timeout.ms while later batches of the partition are acked. The
// callbacks must still run in produce order within the partition.
func TestMixedFaultCallbacksInOrderAfterLostResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(0))
		c.DropProduceResponses(0, 1)
		l.produce(p, 0, 80, 100)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		requireClean(t, c, "t", 1, l)
	})
}

// Issue 12, failure 6: Flush waits for the records produced before the
// call, not for the producer to go idle: under steady load it returns.
//
// "Produced before the call" means Produce returned before Flush was
// called. The producing goroutine numbers a record before handing it to
// Produce, so the test counts what it has handed (handed), not what the
// ledger has numbered: a record numbered just before the count but handed
// to Produce after Flush began is not Flush's to wait for (under load that
// window made this test fail with a correct producer).
func TestMixedFaultFlushUnderSteadyLoadReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		p := memProducer(t, c, n, Linger(50*time.Millisecond))
		l := newLedger("a", "t")
		var handedMu sync.Mutex
		handed := map[int32]int{} // partition -> records whose Produce returned
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
					part := int32(i % 2)
					l.produce(p, part, 1, 50)
					handedMu.Lock()
					handed[part]++
					handedMu.Unlock()
				}
			}
		}()
		time.Sleep(200 * time.Millisecond)
		handedMu.Lock()
		before := map[int32]int{0: handed[0], 1: handed[1]}
		handedMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.Flush(ctx)
		cancel()
		close(stop)
		<-done
		require.NoError(t, err, "Flush under steady load")
		var missing []string
		l.mu.Lock()
		for part, n := range before {
			for seq := range n {
				if c := l.res[recKey{"a", part, seq}].calls; c != 1 {
					missing = append(missing, fmt.Sprintf("%d/%d: %d callbacks", part, seq, c))
				}
			}
		}
		l.mu.Unlock()
		require.Empty(t, missing, "records produced before Flush, not called back once when it returned")
		require.True(t, l.waitAll(time.Minute))
		requireClean(t, c, "t", 2, l)
	})
}

// badMetadataCases are semantically bad Metadata answers (issue 12,
// failure 7). from says when the rewrite starts: at once, or after the
// producer learned the real metadata.
var badMetadataCases = []struct {
	name    string
	late    bool
	rewrite func(*kmsg.MetadataResponse)
}{
	{"partition -1", false, func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			m.Topics[i].Partitions[0].Partition = -1
		}
	}},
	{"duplicate partition ids", false, func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			ps := m.Topics[i].Partitions
			ps[1].Partition = ps[0].Partition
			ps[1].LeaderEpoch = ps[0].LeaderEpoch + 3
		}
	}},
	{"partition count shrinks", true, func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			m.Topics[i].Partitions = m.Topics[i].Partitions[:1]
		}
	}},
	{"leader not in broker list", false, func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			m.Topics[i].Partitions[0].Leader = 42
		}
	}},
	{"negative leader epoch", true, func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			for j := range m.Topics[i].Partitions {
				m.Topics[i].Partitions[j].LeaderEpoch = -5
			}
		}
	}},
	{"huge partition id", false, func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			m.Topics[i].Partitions[1].Partition = 1 << 30
		}
	}},
}

// Issue 12, failure 7: a structurally valid but semantically bad Metadata
// answer must never panic; records get an honest outcome and, once the
// metadata is good again, are delivered. A panic in the sender goroutine
// would kill the test binary, so the cases run in a child process.
func TestMixedFaultBadMetadataNeverPanics(t *testing.T) {
	if os.Getenv("LONGHAUL_BADMETA_CHILD") == "" {
		for _, tc := range badMetadataCases {
			t.Run(tc.name, func(t *testing.T) {
				sub := regexp.QuoteMeta(strings.ReplaceAll(tc.name, " ", "_"))
				cmd := exec.Command(os.Args[0], "-test.run=^TestMixedFaultBadMetadataNeverPanics$/^"+sub+"$", "-test.v", "-test.timeout=20s")
				cmd.Env = append(os.Environ(), "LONGHAUL_BADMETA_CHILD=1")
				out, err := cmd.CombinedOutput()
				if len(out) > 6000 {
					out = append([]byte("...\n"), out[len(out)-6000:]...)
				}
				require.NoError(t, err, "child process (a panic ends it):\n%s", out)
				require.Contains(t, string(out), "--- PASS: TestMixedFaultBadMetadataNeverPanics/"+strings.ReplaceAll(tc.name, " ", "_"))
			})
		}
		return
	}
	for _, tc := range badMetadataCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond,
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
				p := memProducer(t, c, n, MetadataMaxAge(100*time.Millisecond))
				l := newLedger("a", "t")
				if tc.late {
					warmUp(t, p, l, 0, 1)
				}
				c.RewriteMetadata(tc.rewrite)
				l.produce(p, 0, 20, 100)
				l.produce(p, 1, 20, 100)
				c.MoveLeader("t", 0, 1) // makes the producer ask for metadata
				time.Sleep(2 * time.Second)
				c.RewriteMetadata(nil)
				require.True(t, l.waitAll(time.Minute))
				time.Sleep(time.Second) // metadata.max.age.ms passes: good metadata again
				later := newLedger("b", "t")
				later.produce(p, 0, 20, 100)
				later.produce(p, 1, 20, 100)
				require.True(t, later.waitAll(time.Minute))
				require.Empty(t, firstN(later.failures(), 3), "records after the metadata is good again")
				requireClean(t, c, "t", 2, l, later)
			})
		})
	}
}

// Regression tests of two safety failures the randomized mixed-fault test
// found above seed 10,000: a batch that may be in the log was written again
// (chaos seeds 15697, 28603), and records in the log were reported as
// ErrOrderLost, not written (chaos seed 48664).

// produceEach sends one record per batch to part: each record is its own
// batch, sent before the next is produced (linger 0; the sleep lets the
// sender's pass run).
func produceEach(l *ledger, p *Producer, part int32, n int) {
	for range n {
		l.produce(p, part, 1, 100)
		time.Sleep(time.Millisecond)
	}
}

// recordErr is the callback error of record seq of partition part.
func recordErr(t *testing.T, l *ledger, part int32, seq int) error {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.res[recKey{l.name, part, seq}]
	require.True(t, ok, "record %d", seq)
	require.Equal(t, 1, r.calls, "record %d: one callback", seq)
	return r.err
}

// Chaos seed 28603: the broker expired our state (KIP-854) during a pause
// shorter than longhaul.idle.rearm.ms, so a burst goes out with the gate
// open. Batch 2 is refused (NOT_ENOUGH_REPLICAS), batch 3 is appended past
// its gap (the broker has no state: the trap of KAFKA-15591) and answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, batches 1 and 4 fail for good, so the
// epoch is bumped. While the bump resolves batch 3 under the old epoch, the
// broker answers OUT_OF_ORDER_SEQUENCE_NUMBER. That answer behind the
// refused batch 2 once counted as proof that batch 3 was not written: it was
// renumbered and written a second time, after batch 2. Batch 3 must fail,
// fate unknown, batch 2 as ErrOrderLost, and nothing be duplicated.
func TestMixedFaultOutOfOrderPastGapFailsFateUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(0))
		c.ExpireProducerIDs()
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.UnsupportedVersion.Code},
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},
			broker.Answer{Code: kerr.NotEnoughReplicasAfterAppend.Code, Mode: broker.AppendThenFail},
			broker.Answer{Code: kerr.InvalidTxnState.Code},
			broker.Answer{Code: kerr.OutOfOrderSequenceNumber.Code})
		produceEach(l, p, 0, 4)
		require.True(t, l.waitAll(time.Minute), "callbacks")
		require.Zero(t, c.PendingAnswers("t", 0), "every scripted answer used (the last by batch 3's resend)")
		requireClean(t, c, "t", 1, l)

		const first = 200 // warmUp's records come first
		var de *DeliveryError
		err := recordErr(t, l, 0, first+2)
		require.True(t, errors.As(err, &de), "batch 3 fails: %v", err)
		require.True(t, de.FateUnknown, "batch 3 may be in the log: %v", err)
		require.ErrorIs(t, recordErr(t, l, 0, first+1), ErrOrderLost, "batch 2 cannot be written after batch 3")

		// The producer goes on, under the new epoch.
		l.produce(p, 0, 20, 100)
		require.True(t, l.waitAll(time.Minute), "callbacks after the bump")
		for seq := first + 4; seq < first+24; seq++ {
			require.NoError(t, recordErr(t, l, 0, seq))
		}
		requireClean(t, c, "t", 1, l)
	})
}

// Chaos seed 48664: batch X, refused as too large, waits to be split; it
// goes out whole behind an earlier retry (A2: only the oldest retry is
// split, and the drain sends A1 alone), and that attempt is appended and
// answered REQUEST_TIMED_OUT (maybe written). Split then, its halves carry
// sub-ranges of X's sequences, which the broker cannot recognise as
// duplicates: the first was refused as out of order and, a later batch
// being acked, failed as ErrOrderLost ("not written") while its records were
// in the log. A batch that may be in the log is never split: sent whole
// again, it is acked as a duplicate.
func TestMixedFaultMaybeWrittenBatchNotSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(5*time.Millisecond))
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},                            // A1
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},                            // A2
			broker.Answer{Code: kerr.MessageTooLarge.Code},                              // X: to be split
			broker.Answer{Mode: broker.Normal},                                          // Y: out of order (A1's gap)
			broker.Answer{Mode: broker.Normal},                                          // A1 again, alone: written
			broker.Answer{Mode: broker.Normal},                                          // A2 again: written
			broker.Answer{Code: kerr.RequestTimedOut.Code, Mode: broker.AppendThenFail}, // X whole, behind A2: written, in doubt
			broker.Answer{Mode: broker.Normal})                                          // Y again: written
		for _, recs := range []int{1, 1, 2, 1} { // A1, A2, X (two records, one linger), Y
			l.produce(p, 0, recs, 100)
			time.Sleep(6 * time.Millisecond)
		}
		require.True(t, l.waitAll(time.Minute), "callbacks")
		require.Zero(t, c.PendingAnswers("t", 0), "every scripted answer used")
		require.Empty(t, l.failures(), "X is acked as a duplicate of its written attempt")
		requireClean(t, c, "t", 1, l)
	})
}
