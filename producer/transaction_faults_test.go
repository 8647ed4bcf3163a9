package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestTransactionConfig: transactional.id and transaction.timeout.ms as
// properties and typed options, with their checks.
func TestTransactionConfig(t *testing.T) {
	c, err := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "app-1", "transaction.timeout.ms": "90000"})
	require.NoError(t, err)
	require.Equal(t, "app-1", c.transactionalID)
	require.Equal(t, 90*time.Second, c.txnTimeout)
	def, _ := PropertyDefault("transaction.timeout.ms")
	require.Equal(t, "60000", def)

	_, err = New(BootstrapServers("127.0.0.1:9092"), TransactionalID(""))
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "TransactionalID", ce.Option)
	require.Contains(t, ce.Reason, "must not be empty")

	for _, d := range []time.Duration{0, -time.Second, time.Duration(1<<31) * time.Millisecond} {
		_, err = New(BootstrapServers("127.0.0.1:9092"), TransactionalID("x"), TransactionTimeout(d))
		require.ErrorAs(t, err, &ce, "%v", d)
		require.Equal(t, "TransactionTimeout", ce.Option)
		require.Equal(t, "transaction.timeout.ms", ce.Property)
	}
	_, err = NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transaction.timeout.ms": "0"})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "transaction.timeout.ms", ce.Property)

	_, err = NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transaction.two.phase.commit.enable": "true"})
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, "InitProducerId v6")
}

// TestTransactionCallsNeedTransactionalID: every transactional call of a
// producer without transactional.id is ErrTransactionState.
func TestTransactionCallsNeedTransactionalID(t *testing.T) {
	p, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx := context.Background()
	require.ErrorIs(t, p.InitTransactions(ctx), ErrTransactionState)
	require.ErrorIs(t, p.BeginTransaction(), ErrTransactionState)
	require.ErrorIs(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "g"}, nil), ErrTransactionState)
	require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionState)
	require.ErrorIs(t, p.AbortTransaction(ctx), ErrTransactionState)
}

// TestTransactionStateErrors: calls the state does not allow are
// ErrTransactionState and change nothing; InitTransactions a second time
// returns nil.
func TestTransactionStateErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		p := e.producer()
		ctx := context.Background()
		require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionState, "commit before init")
		require.NoError(t, p.InitTransactions(ctx))
		require.NoError(t, p.InitTransactions(ctx), "initialized already")
		require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionState, "commit without a transaction")
		require.ErrorIs(t, p.AbortTransaction(ctx), ErrTransactionState, "abort without a transaction")
		require.ErrorIs(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "g"}, nil), ErrTransactionState)
		require.NoError(t, p.BeginTransaction())
		require.ErrorIs(t, p.BeginTransaction(), ErrTransactionState, "a transaction is open")
		require.NoError(t, produceAll(p, "out", 0, "a")()[0])
		require.NoError(t, p.CommitTransaction(ctx))
		require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionState, "the commit returned its outcome")
		require.Equal(t, []string{"a"}, e.committed("out", 0))
	})
}

// TestTransactionFenced: a second producer with the same transactional id
// fences the first: its open transaction is aborted by the coordinator,
// its commit fails with ErrProducerFenced (and the broker's
// PRODUCER_FENCED), and only Close is left.
func TestTransactionFenced(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				ctx := context.Background()
				old := e.producer()
				require.NoError(t, old.BeginTransaction())
				require.NoError(t, produceAll(old, "out", 0, "zombie")()[0])

				fresh := e.producer()
				require.NoError(t, fresh.InitTransactions(ctx))
				require.NoError(t, fresh.BeginTransaction())
				require.NoError(t, produceAll(fresh, "out", 0, "live")()[0])
				require.NoError(t, fresh.CommitTransaction(ctx))

				err := old.CommitTransaction(ctx)
				require.ErrorIs(t, err, ErrProducerFenced)
				require.True(t, errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch), "%v", err)
				require.ErrorIs(t, old.BeginTransaction(), ErrProducerFenced, "only Close is left")
				require.ErrorIs(t, produceAll(old, "out", 0, "more")()[0], ErrProducerFenced)
				require.Equal(t, []string{"live"}, e.committed("out", 0))
			})
		})
	}
}

// TestTransactionCoordinatorErrorsRetried: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS from the
// coordinators are retried (finding the coordinator again for the first):
// the transaction commits.
func TestTransactionCoordinatorErrorsRetried(t *testing.T) {
	for _, code := range []int16{kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code} {
		t.Run(kerr.ErrorForCode(code).Error()[:20], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{})
				ctx := context.Background()
				p := e.producer()
				e.c.InjectCoordinatorError(-1, code, 3)
				require.NoError(t, p.InitTransactions(ctx))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a")()[0])
				e.c.InjectCoordinatorError(-1, code, 3)
				require.NoError(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "eos", Generation: -1}, []TransactionOffset{{Topic: "in", Offset: 7, LeaderEpoch: -1}}))
				e.c.InjectCoordinatorError(-1, code, 3)
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, []string{"a"}, e.committed("out", 0))
				off, ok := e.c.CommittedOffset("eos", "in", 0)
				require.True(t, ok)
				require.Equal(t, int64(7), off)
			})
		})
	}
}

// TestTransactionCoordinatorMoves: the transaction coordinator moves
// mid-transaction (its old node answers NOT_COORDINATOR): the producer
// finds the new one and the transaction commits, under both versions.
func TestTransactionCoordinatorMoves(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				ctx := context.Background()
				p := e.producer()
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a")()[0])
				from := e.c.Coordinator(e.id, true)
				require.NoError(t, e.c.MoveCoordinator(e.id, true, (from+1)%3))
				require.NoError(t, produceAll(p, "out", 1, "b")()[0])
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, []string{"a"}, e.committed("out", 0))
				require.Equal(t, []string{"b"}, e.committed("out", 1))
			})
		})
	}
}

// TestTransactionTimedOut: the coordinator aborts a transaction that
// outlived its timeout: the commit fails (the producer was fenced from
// that transaction) and nothing of it is read.
func TestTransactionTimedOut(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				ctx := context.Background()
				p := e.producer(TransactionTimeout(time.Second))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "late")()[0])
				time.Sleep(30 * time.Second) // past the timeout and the coordinator's sweep
				info, _ := e.c.Transaction(e.id)
				require.True(t, info.TimedOut, "the coordinator aborted it: %+v", info)
				err := p.CommitTransaction(ctx)
				require.Error(t, err)
				require.True(t, errors.Is(err, ErrProducerFenced) || errors.Is(err, ErrTransactionFatal) || errors.Is(err, ErrTransactionAbortable), "%v", err)
				require.Empty(t, e.committed("out", 0))
			})
		})
	}
}

// TestTransactionWindowKept: inside transactions the learned window and
// the connection cap apply as for idempotent batches (the broker sees 20
// batches in flight, never more), and the window survives from one
// transaction to the next: after the second commit the limit is still 20
// and, on a Kafka 4.1+ leader (Produce v13+), the gate is not re-armed by
// the version 2 epoch bump.
func TestTransactionWindowKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{Nodes: 1, RTT: 50 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "w", Partitions: 1, Window: 20}}})
		ctx := context.Background()
		p := e.producer(MaxInFlightRequestsPerConnection(50), BatchSize(1024), Linger(0))
		for txn := range 2 {
			require.NoError(t, p.BeginTransaction())
			vals := make([]string, 1000)
			for i := range vals {
				vals[i] = fmt.Sprintf("%d-%04d-%090d", txn, i, 0)
			}
			for _, err := range produceAll(p, "w", 0, vals...)() {
				require.NoError(t, err)
			}
			require.NoError(t, p.CommitTransaction(ctx))
			require.Equal(t, 20, p.InFlightLimit("w", 0), "after transaction %d", txn)
			st := p.Stats()
			require.False(t, st.Partitions[0].Gated, "no re-armed gate at the bump on a v14 leader")
		}
		bs := e.c.PartitionStats("w", 0)
		require.Equal(t, 20, bs.MaxInFlight, "the window filled inside transactions, never above it")
		require.Zero(t, bs.OutOfOrder)
		require.Len(t, e.committed("w", 0), 2000)
	})
}

// TestTransactionGateRearmsOnKafka40: on a leader with Produce v12 (Kafka
// 4.0, which accepts a transaction's first batch at any sequence) the
// version 2 epoch bump re-arms the gate; its negative control
// (txnGateNeverRearmed) leaves it open.
func TestTransactionGateRearmsOnKafka40(t *testing.T) {
	for _, bug := range bugCases {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{Nodes: 1, ProduceMaxVersions: map[int32]int16{0: 12}})
				ctx := context.Background()
				p := e.producer(bugOpt(t, txnGateNeverRearmed, bug))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a", "b")()[0])
				require.False(t, p.Stats().Partitions[0].Gated, "acked: the gate opened")
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, !bug, gatedOf(p, "out", 0), "the gate after the bump")
			})
		})
	}
}

// bugOpt is bug without needing needRegress at the top: only called with
// on=true from a loop over bugCases, which holds true only in the
// longhaul_regress build.
func bugOpt(t testing.TB, k knob, on bool) Opt { return bug(t, k, on) }

func gatedOf(p *Producer, topic string, partition int32) bool {
	for _, ps := range p.Stats().Partitions {
		if ps.Topic == topic && ps.Partition == partition {
			return ps.Gated
		}
	}
	return false
}

// TestTransactionNoRecoveryInside: a sequence error inside a transaction
// (UNKNOWN_PRODUCER_ID, which an idempotent producer answers with an
// epoch bump and renumbering) fails the record and makes the transaction
// abortable: no bump, and nothing of it is committed. Negative control
// (txnRecovers): the bump runs inside the transaction, the coordinator
// aborts what was written before it as a fenced transaction, and the
// commit "succeeds" with only the records after the bump.
func TestTransactionNoRecoveryInside(t *testing.T) {
	for _, bug := range bugCases {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{})
				ctx := context.Background()
				p := e.producer(bugOpt(t, txnRecovers, bug))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a")()[0])
				e.c.InjectError("out", 1, kerr.UnknownProducerID.Code, 1)
				berr := produceAll(p, "out", 1, "b")()[0]
				err := p.CommitTransaction(ctx)
				if bug {
					require.NoError(t, berr)
					require.NoError(t, err, "negative control: the bump inside the transaction commits a part of it")
					require.Empty(t, e.committed("out", 0), "negative control: the records before the bump were aborted")
					require.Equal(t, []string{"b"}, e.committed("out", 1), "negative control: the records after it committed")
					return
				}
				require.ErrorIs(t, berr, kerr.UnknownProducerID)
				require.ErrorIs(t, err, ErrTransactionAbortable)
				require.Zero(t, p.Stats().EpochBumps)
				require.NoError(t, p.AbortTransaction(ctx))
				require.Empty(t, e.committed("out", 0))
				require.Empty(t, e.committed("out", 1))
			})
		})
	}
}

// TestTransactionCommitWaitsForRecords: CommitTransaction sends the
// records still lingering and returns only once every one of them has
// been called back; negative control (txnEndEarly): EndTxn goes at once
// and the commit returns before its records were even sent.
func TestTransactionCommitWaitsForRecords(t *testing.T) {
	for _, bug := range bugCases {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{RTT: 20 * time.Millisecond})
				ctx := context.Background()
				p := e.producer(Linger(10*time.Second), bugOpt(t, txnEndEarly, bug))
				require.NoError(t, p.BeginTransaction())
				done := make(chan struct{}, 3)
				for _, v := range []string{"a", "b", "c"} {
					p.Produce(ctx, toPartition("out", 0, []byte(v)), func(*Record, error) { done <- struct{}{} })
				}
				require.NoError(t, p.CommitTransaction(ctx))
				if bug {
					require.Len(t, done, 0, "negative control: committed before any record was sent")
					return
				}
				require.Len(t, done, 3, "every callback ran before CommitTransaction returned")
				require.Equal(t, []string{"a", "b", "c"}, e.committed("out", 0))
			})
		})
	}
}

// TestTransactionCommitAfterFailedRecordRefused is the negative control of
// TestTransactionFailedRecordFailsCommit's rule: with record failures
// hidden from the core (txnCommitAfterFailed), the commit succeeds
// although a record of the transaction failed.
func TestTransactionCommitAfterFailedRecordRefused(t *testing.T) {
	for _, bug := range bugCases {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{})
				ctx := context.Background()
				p := e.producer(bugOpt(t, txnCommitAfterFailed, bug))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "ok")()[0])
				e.c.InjectError("out", 1, kerr.InvalidRecord.Code, 1)
				require.ErrorIs(t, produceAll(p, "out", 1, "bad")()[0], kerr.InvalidRecord)
				err := p.CommitTransaction(ctx)
				if bug {
					require.NoError(t, err, "negative control: committed without the failed record")
					return
				}
				require.ErrorIs(t, err, ErrTransactionAbortable)
			})
		})
	}
}

// TestTransactionCommitCtxEnds: a CommitTransaction whose ctx ends returns
// ctx's error and the commit goes on; AbortTransaction and
// BeginTransaction are refused until CommitTransaction, called again,
// returns the outcome.
func TestTransactionCommitCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		produceAll(p, "out", 0, "a")
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := p.CommitTransaction(short)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, p.AbortTransaction(context.Background()), ErrTransactionState)
		require.ErrorIs(t, p.BeginTransaction(), ErrTransactionState)
		require.NoError(t, p.CommitTransaction(context.Background()), "called again: the outcome")
		require.Equal(t, []string{"a"}, e.committed("out", 0))
		require.NoError(t, p.BeginTransaction())
	})
}

// TestTransactionAbortCtxEnds: the same for AbortTransaction.
func TestTransactionAbortCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		w := produceAll(p, "out", 0, "a")
		for p.Stats().BatchesSent == 0 {
			time.Sleep(time.Millisecond) // until sent; answered a round trip later
		}
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.AbortTransaction(short), context.DeadlineExceeded)
		require.NoError(t, p.AbortTransaction(context.Background()))
		w()
		require.Empty(t, e.committed("out", 0))
	})
}

// TestTransactionCloseAborts: Close with a transaction open aborts it:
// unsent records fail with ErrTransactionAborted and the coordinator
// aborts the transaction.
func TestTransactionCloseAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		p := e.producer(Linger(time.Minute), DeliveryTimeout(2*time.Minute))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "sent")()[0])
		w := produceAll(p, "out", 0, "unsent")
		require.NoError(t, p.Close(context.Background()))
		require.ErrorIs(t, w()[0], ErrTransactionAborted)
		e.settled()
		require.Equal(t, int64(1), e.c.TxnStats().Aborted)
		require.Empty(t, e.committed("out", 0))
	})
}

// TestTransactionProduceSyncAndFlush: ProduceSync and Flush work inside a
// transaction.
func TestTransactionProduceSyncAndFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer(Linger(time.Minute), DeliveryTimeout(2*time.Minute))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, p.ProduceSync(ctx, toPartition("out", 0, []byte("s1")), toPartition("out", 1, []byte("s2"))).FirstErr())
		w := produceAll(p, "out", 0, "f1")
		require.NoError(t, p.Flush(ctx))
		require.NoError(t, w()[0], "flushed")
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, []string{"s1", "f1"}, e.committed("out", 0))
		require.Equal(t, []string{"s2"}, e.committed("out", 1))
	})
}

// TestTransactionPurgeMakesAbortable: Purge inside a transaction fails its
// unsent records, and the transaction can then only be aborted:
// CommitTransaction returns ErrTransactionAbortable wrapping ErrPurged.
func TestTransactionPurgeMakesAbortable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer(Linger(time.Minute), DeliveryTimeout(2*time.Minute))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "sent")()[0])
		w := produceAll(p, "out", 0, "purged")
		require.NoError(t, p.Purge(ctx))
		require.ErrorIs(t, w()[0], ErrPurged)
		err := p.CommitTransaction(ctx)
		require.ErrorIs(t, err, ErrTransactionAbortable)
		require.ErrorIs(t, err, ErrPurged)
		require.NoError(t, p.AbortTransaction(ctx))
		require.Empty(t, e.committed("out", 0))
	})
}

// TestTransactionInitCtxEnds: InitTransactions whose ctx ends returns
// ctx's error and goes on; called again it waits for the outcome. A lazy
// BeginTransaction waits at most max.block.ms for initialization.
func TestTransactionInitCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		p := e.producer(MaxBlock(time.Second))
		e.c.InjectCoordinatorError(-1, kerr.CoordinatorLoadInProgress.Code, 1000000)
		start := time.Now()
		require.ErrorIs(t, p.BeginTransaction(), context.DeadlineExceeded, "lazy init bounded by max.block.ms")
		require.Equal(t, time.Second, time.Since(start))
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.InitTransactions(short), context.DeadlineExceeded)
		e.c.InjectCoordinatorError(-1, 0, 0)
		require.NoError(t, p.InitTransactions(context.Background()), "called again: the outcome")
		require.NoError(t, p.BeginTransaction())
	})
}

// TestTransactionInitRefused: a transactional id the cluster denies, and
// a transaction.timeout.ms above the coordinator's
// transaction.max.timeout.ms, fail InitTransactions with
// ErrTransactionFatal and the broker's error.
func TestTransactionInitRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		e.c.DenyTransactionalID(e.id, true)
		err := e.producer().InitTransactions(ctx)
		require.ErrorIs(t, err, ErrTransactionFatal)
		require.ErrorIs(t, err, kerr.TransactionalIDAuthorizationFailed)
		e.c.DenyTransactionalID(e.id, false)
		err = e.producer(TransactionTimeout(16 * time.Minute)).InitTransactions(ctx)
		require.ErrorIs(t, err, ErrTransactionFatal)
		require.ErrorIs(t, err, kerr.InvalidTransactionTimeout)
	})
}

// TestTransactionCallsInCallback: the transactional calls return
// ErrInCallback from a record callback.
func TestTransactionCallsInCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		got := make(chan []error, 1)
		p.Produce(ctx, toPartition("out", 0, []byte("a")), func(*Record, error) {
			got <- []error{p.InitTransactions(ctx), p.BeginTransaction(), p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "g"}, nil),
				p.CommitTransaction(ctx), p.AbortTransaction(ctx)}
		})
		for _, err := range <-got {
			require.ErrorIs(t, err, ErrInCallback)
		}
		require.NoError(t, p.CommitTransaction(ctx))
	})
}

// TestTransactionAbortableRefusesBegin: while the open transaction can
// only be aborted, BeginTransaction and Produce return its error.
func TestTransactionAbortableRefusesBegin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		e.c.InjectError("out", 0, kerr.InvalidRecord.Code, 1)
		require.ErrorIs(t, produceAll(p, "out", 0, "bad")()[0], kerr.InvalidRecord)
		require.ErrorIs(t, p.BeginTransaction(), ErrTransactionAbortable)
		require.ErrorIs(t, produceAll(p, "out", 0, "x")()[0], ErrTransactionAbortable)
		require.ErrorIs(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "g", Generation: -1}, nil), ErrTransactionAbortable)
		require.NoError(t, p.AbortTransaction(ctx))
		require.NoError(t, p.BeginTransaction())
	})
}

// TestTransactionOffsetsOfAZombieConsumer: offsets sent with group
// metadata naming a generation the group is not at are refused by the
// group coordinator (ILLEGAL_GENERATION): SendOffsetsToTransaction returns
// ErrTransactionAbortable with it, and the transaction must abort.
func TestTransactionOffsetsOfAZombieConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "a")()[0])
		err := p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "eos", Generation: 7, MemberID: "gone"},
			[]TransactionOffset{{Topic: "in", Offset: 5, LeaderEpoch: -1}})
		require.ErrorIs(t, err, ErrTransactionAbortable)
		require.True(t, errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration), "%v", err)
		require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionAbortable)
		require.NoError(t, p.AbortTransaction(ctx))
		_, ok := e.c.CommittedOffset("eos", "in", 0)
		require.False(t, ok)
	})
}

// TestTransactionOffsetsCtxEnds: SendOffsetsToTransaction whose ctx ends
// returns ctx's error and the offsets are still sent: the commit waits for
// them and commits them.
func TestTransactionOffsetsCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := p.SendOffsetsToTransaction(short, GroupMetadata{GroupID: "eos", Generation: -1}, []TransactionOffset{{Topic: "in", Offset: 5, LeaderEpoch: -1}})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, p.CommitTransaction(context.Background()))
		e.settled()
		off, ok := e.c.CommittedOffset("eos", "in", 0)
		require.True(t, ok)
		require.Equal(t, int64(5), off)
	})
}

// TestTransactionCommitUnknown: the EndTxn(commit) answer is lost after the
// coordinator applied it, and the retry is refused (INVALID_TXN_STATE):
// CommitTransaction returns ErrCommitUnknown, and the next
// BeginTransaction initializes again, after which transactions go on. The
// lost commit had happened: its record is read.
func TestTransactionCommitUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: 200 * time.Millisecond})
		ctx := context.Background()
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "a")()[0])
		res := make(chan error, 1)
		go func() { res <- p.CommitTransaction(ctx) }()
		for {
			if info, _ := e.c.Transaction(e.id); info.State == "PrepareCommit" || info.State == "CompleteCommit" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		e.c.InjectCoordinatorError(26, kerr.InvalidTxnState.Code, 1)
		e.c.DropConnections(e.c.Coordinator(e.id, true))
		err := <-res
		require.ErrorIs(t, err, ErrCommitUnknown)
		require.ErrorIs(t, err, kerr.InvalidTxnState)
		require.NoError(t, p.BeginTransaction(), "initializes again")
		require.NoError(t, produceAll(p, "out", 0, "b")()[0])
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, []string{"a", "b"}, e.committed("out", 0))
	})
}

// commitUnknownOpen makes p's CommitTransaction of the open transaction
// end in ErrCommitUnknown with the transaction still open at the
// coordinator: the EndTxn(commit) is written to a stalled coordinator
// whose connection then drops before it reads it, and the retry is
// refused (INVALID_TXN_STATE) without being applied.
func (e *txnEnv) commitUnknownOpen(p *Producer) {
	e.t.Helper()
	coord := e.c.Coordinator(e.id, true)
	e.c.Stall(coord, time.Hour)
	res := make(chan error, 1)
	go func() { res <- p.CommitTransaction(context.Background()) }()
	time.Sleep(time.Second) // the EndTxn(commit) is written and waits
	e.c.InjectCoordinatorError(26, kerr.InvalidTxnState.Code, 1)
	e.c.Stall(coord, 0)
	e.c.DropConnections(coord)
	err := <-res
	require.ErrorIs(e.t, err, ErrCommitUnknown)
	info, ok := e.c.Transaction(e.id)
	require.True(e.t, ok)
	require.Equal(e.t, "Ongoing", info.State, "the lost commit was not applied")
}

// TestTransactionCommitUnknownStillOpen: the EndTxn(commit) is lost before
// the coordinator applied it and the retry is refused, so
// CommitTransaction returns ErrCommitUnknown while the transaction is
// still open there. The next BeginTransaction re-initializes: it aborts
// that transaction first (EndTxn(abort) with its id and epoch), so the
// InitProducerId after it finds nothing to fence. An InitProducerId sent
// over the open transaction would fence it, and under transaction version
// 1 its retry with the same epoch is PRODUCER_FENCED (Kafka forgets the
// epoch before a fence). The first transaction's record is never read
// committed; the next transaction commits.
func TestTransactionCommitUnknownStillOpen(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{RTT: 20 * time.Millisecond})
				ctx := context.Background()
				p := e.producer(RequestTimeout(10 * time.Second))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a")()[0])
				e.commitUnknownOpen(p)
				require.NoError(t, p.BeginTransaction(), "initializes again")
				require.NoError(t, produceAll(p, "out", 0, "b")()[0])
				require.NoError(t, p.CommitTransaction(ctx))
				e.settled()
				require.Equal(t, []string{"b"}, e.committed("out", 0))
				require.Zero(t, e.c.TxnStats().Fenced, "the re-init fenced nothing")
			})
		})
	}
}

// TestTransactionCommitUnknownZombie: after ErrCommitUnknown with the
// transaction still open, another producer takes the transactional id
// (fencing that transaction) and opens its own. The first producer's
// re-init (its next BeginTransaction) is ErrProducerFenced, and the other's transaction is left open:
// it commits. Re-initializing with InitProducerId directly would fence the
// other's transaction, as its producer id is the same.
func TestTransactionCommitUnknownZombie(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{RTT: 20 * time.Millisecond})
				ctx := context.Background()
				p := e.producer(RequestTimeout(10 * time.Second))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a")()[0])
				e.commitUnknownOpen(p)
				q := e.producer(RequestTimeout(10 * time.Second))
				require.NoError(t, q.InitTransactions(ctx))
				require.NoError(t, q.BeginTransaction())
				require.NoError(t, produceAll(q, "out", 0, "z")()[0])
				fenced := e.c.TxnStats().Fenced
				require.ErrorIs(t, p.BeginTransaction(), ErrProducerFenced, "the re-init")
				require.ErrorIs(t, p.InitTransactions(ctx), ErrProducerFenced)
				require.Equal(t, fenced, e.c.TxnStats().Fenced, "the other's transaction was not fenced")
				require.NoError(t, q.CommitTransaction(ctx))
				e.settled()
				require.Equal(t, []string{"z"}, e.committed("out", 0))
			})
		})
	}
}
