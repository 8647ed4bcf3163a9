package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// The tests of DESIGN.md's "Abort-only" rule: once a transaction can only
// be aborted, nothing of it is sent again. Each runs under transaction
// versions 1 and 2; in the longhaul_regress build each also runs with
// txnSendsAbortOnly, the transaction going on sending, and sees it.

// drainCalls records callbacks in the order they ran.
type drainCalls struct {
	mu    sync.Mutex
	order []string
	errs  map[string]error
	at    map[string]time.Time
	wg    sync.WaitGroup
}

func newDrainCalls() *drainCalls {
	return &drainCalls{errs: map[string]error{}, at: map[string]time.Time{}}
}

func (d *drainCalls) produce(p *Producer, topic string, part int32, values ...string) {
	for _, v := range values {
		d.wg.Add(1)
		p.Produce(context.Background(), toPartition(topic, part, []byte(v)), func(_ *Record, err error) {
			d.mu.Lock()
			d.order = append(d.order, v)
			d.errs[v], d.at[v] = err, time.Now()
			d.mu.Unlock()
			d.wg.Done()
		})
	}
}

func (d *drainCalls) err(v string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.errs[v]
}

func (d *drainCalls) when(v string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at[v]
}

// TestTxnAbortOnlyFailsRetries: a sent batch waiting for retry when the
// transaction turns abort-only (a record of another partition failed)
// fails at once, without being sent again, with an error that is both
// ErrTransactionAbortable and its own last error (NOT_ENOUGH_REPLICAS);
// a batch queued behind it on its partition fails after it (produce
// order), with the transaction's error. AbortTransaction then returns
// and the next transaction commits. Negative control
// (txnSendsAbortOnly): the batch is sent again until delivery.timeout.ms.
func TestTxnAbortOnlyFailsRetries(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		for _, bug := range bugCases {
			t.Run(fmt.Sprintf("TV%d/bug=%v", tv, bug), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e, p, calls := retryingBatch(t, tv, bug)
					ctx := context.Background()
					calls.produce(p, "out", 0, "b") // queued behind a's retry
					time.Sleep(10 * time.Millisecond)
					e.c.InjectError("out", 1, kerr.InvalidRecord.Code, 1)
					calls.produce(p, "out", 1, "bad")
					calls.wg.Wait()
					sends := refusals - e.c.PendingAnswers("out", 0)
					time.Sleep(time.Second)
					later := refusals - e.c.PendingAnswers("out", 0) - sends
					require.ErrorIs(t, calls.err("bad"), kerr.InvalidRecord)
					failed := calls.when("bad")
					if bug {
						require.Greater(t, calls.when("a").Sub(failed), 10*time.Second,
							"negative control: a was retried until delivery.timeout.ms")
						return
					}
					require.Equal(t, failed, calls.when("a"), "a failed when the transaction turned abort-only")
					require.Zero(t, later, "nothing sent after a failed")
					require.ErrorIs(t, calls.err("a"), ErrTransactionAbortable)
					require.ErrorIs(t, calls.err("a"), kerr.NotEnoughReplicas, "a's own last error")
					require.ErrorIs(t, calls.err("a"), kerr.InvalidRecord, "the transaction's error")
					var de *DeliveryError
					require.True(t, errors.As(calls.err("a"), &de))
					require.ErrorIs(t, calls.err("b"), ErrTransactionAbortable)
					require.ErrorIs(t, calls.err("b"), kerr.InvalidRecord)
					calls.mu.Lock()
					order := append([]string(nil), calls.order...)
					calls.mu.Unlock()
					require.Less(t, slices.Index(order, "a"), slices.Index(order, "b"), "callbacks in produce order on out/0: %v", order)
					require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionAbortable)
					require.NoError(t, p.AbortTransaction(ctx))

					e.c.InjectError("out", 0, 0, 0)
					require.NoError(t, p.BeginTransaction())
					require.NoError(t, produceAll(p, "out", 0, "c")()[0])
					require.NoError(t, p.CommitTransaction(ctx))
					require.Equal(t, []string{"c"}, e.committed("out", 0))
				})
			})
		}
	}
}

// refusals is how many times the retrying-batch tests' partition out/0
// answers NOT_ENOUGH_REPLICAS: more than any test lasts.
const refusals = 100000

// retryingBatch starts a transaction of tv whose record "a" on out/0 was
// sent and is being retried (out/0 refuses it with NOT_ENOUGH_REPLICAS),
// on a producer with the txnSendsAbortOnly bug back when bug is set.
func retryingBatch(t *testing.T, tv int16, bug bool) (*txnEnv, *Producer, *drainCalls) {
	e := newTxnEnv(t, tv, broker.Config{})
	p := e.producer(bugOpt(t, txnSendsAbortOnly, bug))
	require.NoError(t, p.BeginTransaction())
	e.c.InjectError("out", 0, kerr.NotEnoughReplicas.Code, refusals)
	calls := newDrainCalls()
	calls.produce(p, "out", 0, "a")
	time.Sleep(300 * time.Millisecond) // a is refused and retried
	require.Greater(t, refusals-e.c.PendingAnswers("out", 0), 1, "a was sent and retried")
	return e, p, calls
}

// TestTxnAbortOnlyWaitsInFlight: a batch in flight when the transaction
// turns abort-only is waited for: AbortTransaction returns only after
// its answer. Answered with an error the sender would retry
// (NOT_ENOUGH_REPLICAS), it fails at once with ErrTransactionAbortable
// and that error, and is not sent again: nothing of it reaches the log.
// Negative control (txnSendsAbortOnly): it is retried and appended
// before the abort.
func TestTxnAbortOnlyWaitsInFlight(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		for _, bug := range bugCases {
			t.Run(fmt.Sprintf("TV%d/bug=%v", tv, bug), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newTxnEnv(t, tv, broker.Config{})
					require.NoError(t, e.c.MoveCoordinator(e.id, true, 0))
					require.NoError(t, e.c.MoveLeader("out", 0, 1))
					require.NoError(t, e.c.MoveLeader("out", 1, 2))
					ctx := context.Background()
					p := e.producer(RequestTimeout(10*time.Second), bugOpt(t, txnSendsAbortOnly, bug))
					require.NoError(t, p.BeginTransaction())
					// The partitions are added (version 1) and the
					// connections made before node 1 slows down.
					require.NoError(t, produceAll(p, "out", 0, "first")()[0])
					e.c.SetRTT(1, 2*time.Second)
					e.c.ScriptAnswers("out", 0, broker.Answer{Code: kerr.NotEnoughReplicas.Code})
					calls := newDrainCalls()
					calls.produce(p, "out", 0, "a") // in flight for 2 s
					time.Sleep(100 * time.Millisecond)
					e.c.InjectError("out", 1, kerr.InvalidRecord.Code, 1)
					require.ErrorIs(t, produceAll(p, "out", 1, "bad")()[0], kerr.InvalidRecord)
					require.Zero(t, calls.when("a"), "a is still in flight")
					require.NoError(t, p.AbortTransaction(ctx))
					aborted := time.Now()
					calls.wg.Wait()
					require.False(t, calls.when("a").After(aborted), "AbortTransaction returned after a's answer")
					records := len(e.c.Records("out", 0))
					if bug {
						require.Equal(t, 2, records, "negative control: a was retried and appended")
						return
					}
					require.Equal(t, 1, records, "only the first record reached out/0")
					require.ErrorIs(t, calls.err("a"), ErrTransactionAbortable)
					require.ErrorIs(t, calls.err("a"), kerr.NotEnoughReplicas)
					require.Empty(t, e.committed("out", 0))
				})
			})
		}
	}
}

// TestTxnAbortOnlyNoSplitHalf: the second half of a split whose first
// half failed is not sent: it fails with ErrTransactionAbortable and its
// own last error (MESSAGE_TOO_LARGE), after the first half's callbacks.
// Negative control (txnSendsAbortOnly): the second half is sent (refused
// as out of order, or appended where the partition knows no batch of the
// producer).
func TestTxnAbortOnlyNoSplitHalf(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		for _, bug := range bugCases {
			t.Run(fmt.Sprintf("TV%d/bug=%v", tv, bug), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newTxnEnv(t, tv, broker.Config{})
					ctx := context.Background()
					p := e.producer(Linger(50*time.Millisecond), bugOpt(t, txnSendsAbortOnly, bug))
					require.NoError(t, p.BeginTransaction())
					e.c.ScriptAnswers("out", 0, broker.Answer{Code: kerr.MessageTooLarge.Code}, broker.Answer{Code: kerr.InvalidRecord.Code})
					calls := newDrainCalls()
					calls.produce(p, "out", 0, "r0", "r1", "r2", "r3") // one batch, split in two
					calls.wg.Wait()
					// Sent, the second half is refused as out of order (its
					// sequence follows the first half's, not in the log),
					// or, where the partition knows no batch of the
					// producer yet (version 1), appended.
					ooo, records := e.c.PartitionStats("out", 0).OutOfOrder, len(e.c.Records("out", 0))
					if bug {
						require.True(t, ooo > 0 || records > 0, "negative control: the second half was sent")
						return
					}
					require.Zero(t, ooo, "the second half was not sent")
					require.Zero(t, records)
					for _, v := range []string{"r0", "r1"} {
						require.ErrorIs(t, calls.err(v), kerr.InvalidRecord)
					}
					for _, v := range []string{"r2", "r3"} {
						require.ErrorIs(t, calls.err(v), ErrTransactionAbortable)
						require.ErrorIs(t, calls.err(v), kerr.MessageTooLarge)
					}
					calls.mu.Lock()
					require.Equal(t, []string{"r0", "r1", "r2", "r3"}, calls.order)
					calls.mu.Unlock()
					require.NoError(t, p.AbortTransaction(ctx))
				})
			})
		}
	}
}

// TestTxnLateAppendRefused: a request of an aborted transaction that
// reaches the partition's leader after the abort marker (sent before the
// abort, its answer given up on) appends nothing and leaves no
// transaction open there, as Kafka refuses it: under version 2 its epoch
// is below the marker's (INVALID_PRODUCER_EPOCH); under version 1, with
// the same epoch, the partition is in no ongoing transaction (KIP-890
// part 1 verification: TRANSACTION_ABORTABLE from Produce v11), and
// after the epoch bump that follows an abort with a failed record its
// epoch is fenced (INVALID_PRODUCER_EPOCH).
func TestTxnLateAppendRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		tv   int16
		bump bool // version 1: a record failed, the abort ends with a bump
		want error
	}{
		{"TV2", 2, false, kerr.InvalidProducerEpoch},
		{"TV1", 1, false, kerr.TransactionAbortable},
		{"TV1/bumped", 1, true, kerr.InvalidProducerEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "late"
			c, err := broker.Start(broker.Config{Nodes: 3, Topics: []broker.TopicConfig{{Name: topic, Partitions: 2}}})
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			require.NoError(t, c.SetTransactionVersion(tc.tv))
			var cfg protocol.DialConfig
			if tc.tv == 1 {
				cfg.MaxVersions = map[int16]int16{0: protocol.MaxTV1ProduceVersion}
			}
			d := newTxnWireDriver(t, c.Addr(), cfg, topic, 2)
			require.NoError(t, d.core.initTransactions())
			require.NoError(t, d.until(txnOpInit))
			require.NoError(t, d.core.begin(int(tc.tv)))
			tp := protocol.TopicPartition{Topic: topic, Partition: 0}
			require.NoError(t, d.produce(tp, "a"))
			// The late request: the next batch of the transaction, as it
			// was sent before the abort.
			var bb protocol.BatchBuilder
			bb.Append(time.Now().UnixMilli(), nil, []byte("late"), nil)
			late, err := bb.Build(nil, protocol.BatchHeader{ProducerID: d.core.id, ProducerEpoch: d.core.epoch,
				BaseSequence: d.seq[tp], Transactional: true})
			require.NoError(t, err)
			if tc.bump {
				c.InjectError(topic, 1, kerr.InvalidRecord.Code, 1)
				require.ErrorIs(t, d.produce(protocol.TopicPartition{Topic: topic, Partition: 1}, "bad"), kerr.InvalidRecord)
				require.True(t, d.core.bumpAfterAbort)
			}
			epoch := d.core.epoch
			_, err = d.core.abort()
			require.NoError(t, err)
			require.NoError(t, d.until(txnOpAbort))
			require.Eventually(t, func() bool { // markers written (the bump leaves it Empty)
				info, ok := c.Transaction(d.txnID)
				return ok && (info.State == "CompleteAbort" || info.State == "Empty")
			}, 10*time.Second, time.Millisecond)
			if tc.tv == 2 || tc.bump {
				require.Greater(t, d.core.epoch, epoch, "the abort bumped the epoch")
			}

			req := &protocol.ProduceRequest{TransactionalID: &d.txnID, Acks: -1, Timeout: 10 * time.Second}
			req.Add(topic, d.topicIDs[topic], 0, late)
			var res protocol.ProduceResult
			ch := make(chan error, 1)
			d.leaders[tp].Produce(req, &res, 10*time.Second, func(err error) { ch <- err })
			require.NoError(t, <-ch)
			require.ErrorIs(t, kerr.ErrorForCode(res.Partitions[0].ErrorCode), tc.want)
			for _, r := range c.Records(topic, 0) {
				require.NotEqual(t, "late", string(r.Value), "the late batch appended")
			}
			require.Equal(t, c.LogEndOffset(topic, 0), c.LastStableOffset(topic, 0), "no transaction left open")
			require.Empty(t, committedValues(c, topic, 0))
		})
	}
}

// TestTxnAbortDropsRetries: AbortTransaction called while a sent batch
// waits for retry (no record failed) fails it at once, not sent again,
// with an error that is both ErrTransactionAborted and its own last
// error (NOT_ENOUGH_REPLICAS), and returns without waiting for
// delivery.timeout.ms; the next transaction commits. Negative control
// (txnSendsAbortOnly): the batch is sent again until delivery.timeout.ms,
// and the abort waits for it.
func TestTxnAbortDropsRetries(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		for _, bug := range bugCases {
			t.Run(fmt.Sprintf("TV%d/bug=%v", tv, bug), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e, p, calls := retryingBatch(t, tv, bug)
					ctx := context.Background()
					start := time.Now()
					require.NoError(t, p.AbortTransaction(ctx))
					took := time.Since(start)
					calls.wg.Wait()
					if bug {
						require.Greater(t, took, 10*time.Second, "negative control: the abort waited for a's retries")
						return
					}
					require.Equal(t, start, calls.when("a"), "a failed when AbortTransaction was called")
					require.Less(t, took, time.Second)
					require.ErrorIs(t, calls.err("a"), ErrTransactionAborted)
					require.ErrorIs(t, calls.err("a"), kerr.NotEnoughReplicas, "a's own last error")

					e.c.InjectError("out", 0, 0, 0)
					require.NoError(t, p.BeginTransaction())
					require.NoError(t, produceAll(p, "out", 0, "c")()[0])
					require.NoError(t, p.CommitTransaction(ctx))
					require.Equal(t, []string{"c"}, e.committed("out", 0))
				})
			})
		}
	}
}
