package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// txnWireDriver runs a txnCore over real connections, one call at a
// time: the test's stand-in for the sender wiring still to come. Every
// request the core asks for goes through the protocol package's calls;
// batches go through Conn.Produce with the transactional id.
type txnWireDriver struct {
	t        *testing.T
	core     *txnCore
	cfg      protocol.DialConfig
	boot     *protocol.Conn
	coord    *protocol.Conn // the transaction coordinator
	group    *protocol.Conn // the group coordinator
	leaders  map[protocol.TopicPartition]*protocol.Conn
	topicIDs map[string][16]byte
	seq      map[protocol.TopicPartition]int32
	txnID    string
	// renumbers counts the renumber outcomes; concurrent the produce
	// answers CONCURRENT_TRANSACTIONS, retried.
	renumbers, concurrent int
}

func newTxnWireDriver(t *testing.T, addr string, cfg protocol.DialConfig, topic string, partitions int32) *txnWireDriver {
	ctx := context.Background()
	d := &txnWireDriver{t: t, cfg: cfg, txnID: "txn-" + t.Name(), leaders: map[protocol.TopicPartition]*protocol.Conn{},
		topicIDs: map[string][16]byte{}, seq: map[protocol.TopicPartition]int32{}}
	d.boot = d.dial(addr)
	v, _ := d.boot.Version(22)
	d.core = newTxnCore(d.txnID, 60000, false, v >= 3)
	md, err := protocol.Metadata(ctx, d.boot, []string{topic})
	require.NoError(t, err)
	tm := md.Topics[topic]
	d.topicIDs[topic] = tm.ID
	require.Len(t, tm.Partitions, int(partitions))
	for _, p := range tm.Partitions {
		d.leaders[protocol.TopicPartition{Topic: topic, Partition: p.Partition}] = d.dial(md.Brokers[p.Leader])
	}
	return d
}

func (d *txnWireDriver) dial(addr string) *protocol.Conn {
	c, err := protocol.Dial(context.Background(), addr, d.cfg)
	require.NoError(d.t, err)
	d.t.Cleanup(func() { c.Close() })
	return c
}

// apply takes an outcome: renumbering, and the calls it completed.
func (d *txnWireDriver) apply(out txnOutcome, err error, done map[txnOp]error) {
	d.t.Helper()
	require.NoError(d.t, err)
	if out.renumber {
		d.renumbers++
		clear(d.seq)
	}
	if out.backoff {
		// A real cluster creates its coordinators' topics on first use.
		time.Sleep(min(time.Duration(out.attempt)*5*time.Millisecond, 200*time.Millisecond))
	}
	for _, dn := range out.done {
		done[dn.op] = dn.err
	}
}

// step sends the request the core asks for and applies its answer;
// false when it asks for none.
func (d *txnWireDriver) step(done map[txnOp]error) bool {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, out := d.core.next()
	d.apply(out, nil, done)
	var err error
	switch req.kind {
	case txnReqNone:
		return false
	case txnReqFindCoordinator:
		var res protocol.CoordinatorResult
		if res, err = protocol.FindCoordinator(ctx, d.boot, req.keyType, req.key); err == nil {
			if res.ErrorCode == 0 {
				c := d.dial(res.Addr)
				if req.keyType == protocol.CoordinatorGroup {
					d.group = c
				} else {
					d.coord = c
				}
			}
			out, err := d.core.onCoordinator(res)
			d.apply(out, err, done)
		}
	case txnReqInitProducerID:
		var res protocol.InitTxnResult
		if res, err = protocol.InitTransactionalID(ctx, d.coord, d.txnID, time.Duration(req.timeoutMs)*time.Millisecond, req.producer.ProducerID, req.producer.Epoch); err == nil {
			out, err := d.core.onInit(res)
			d.apply(out, err, done)
		}
	case txnReqAddPartitions:
		var res []protocol.PartitionErrorCode
		if res, err = protocol.AddPartitionsToTxn(ctx, d.coord, req.producer, req.partitions); err == nil {
			out, err := d.core.onAddPartitions(res)
			d.apply(out, err, done)
		}
	case txnReqAddOffsets:
		var code int16
		if code, err = protocol.AddOffsetsToTxn(ctx, d.coord, req.producer, req.group.GroupID); err == nil {
			out, err := d.core.onAddOffsets(code)
			d.apply(out, err, done)
		}
	case txnReqTxnOffsetCommit:
		var res []protocol.PartitionErrorCode
		if res, err = protocol.TxnOffsetCommit(ctx, d.group, req.producer, req.group, req.offsets, req.tv); err == nil {
			out, err := d.core.onTxnOffsetCommit(res)
			d.apply(out, err, done)
		}
	case txnReqEndTxn:
		var res protocol.EndTxnResult
		if res, err = protocol.EndTxn(ctx, d.coord, req.producer, req.commit, req.tv); err == nil {
			out, err := d.core.onEndTxn(res)
			d.apply(out, err, done)
		}
	}
	if err != nil {
		out, err2 := d.core.transportFailed(req.kind, !protocol.SafeToRetry(err))
		d.apply(out, err2, done)
	}
	return true
}

// until steps until op completes and returns its error.
func (d *txnWireDriver) until(op txnOp) error {
	d.t.Helper()
	done := map[txnOp]error{}
	for range 2000 {
		if err, ok := done[op]; ok {
			return err
		}
		if !d.step(done) {
			if err, ok := done[op]; ok {
				return err
			}
			d.t.Fatalf("op %d not completed and nothing to send (state %v)", op, d.core.state)
		}
	}
	d.t.Fatalf("op %d not completed after 2000 requests", op)
	return nil
}

// produce sends values to tp in one transactional batch once the core
// lets it (adding the partition first under version 1), and reports the
// answer to the core.
func (d *txnWireDriver) produce(tp protocol.TopicPartition, values ...string) error {
	d.t.Helper()
	for range values {
		if err := d.core.recordQueued(tp); err != nil {
			return err
		}
	}
	done := map[txnOp]error{}
	for !d.core.maySend(tp) {
		require.True(d.t, d.step(done), "partition %v never sendable (state %v)", tp, d.core.state)
	}
	var bb protocol.BatchBuilder
	now := time.Now().UnixMilli()
	for _, v := range values {
		bb.Append(now, nil, []byte(v), nil)
	}
	batch, err := bb.Build(nil, protocol.BatchHeader{ProducerID: d.core.id, ProducerEpoch: d.core.epoch,
		BaseSequence: d.seq[tp], Transactional: true})
	require.NoError(d.t, err)
	d.seq[tp] += int32(len(values))
	require.NoError(d.t, d.core.batchSent(tp, len(values)))
	req := &protocol.ProduceRequest{TransactionalID: &d.txnID, Acks: -1, Timeout: 10 * time.Second}
	req.Add(tp.Topic, d.topicIDs[tp.Topic], tp.Partition, batch)
	var res protocol.ProduceResult
	for attempt := 1; ; attempt++ {
		ch := make(chan error, 1)
		d.leaders[tp].Produce(req, &res, 10*time.Second, func(err error) { ch <- err })
		err = <-ch
		if err == nil && res.Partitions[0].ErrorCode != 0 {
			err = kerr.ErrorForCode(res.Partitions[0].ErrorCode)
		}
		// The previous transaction's markers are still being written
		// (Kafka answers so after waiting about 100 ms itself); the
		// batch was not written: send it again, same sequence.
		if !errors.Is(err, kerr.ConcurrentTransactions) || attempt == 50 {
			break
		}
		d.concurrent++
		time.Sleep(20 * time.Millisecond)
	}
	out, err2 := d.core.batchAnswered(tp, len(values), err)
	d.apply(out, err2, map[txnOp]error{})
	return err
}

// waitTxnComplete waits until the coordinator wrote the markers of
// txnID's last transaction.
func waitTxnComplete(t *testing.T, c *broker.Cluster, txnID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, ok := c.Transaction(txnID)
		return ok && (info.State == "CompleteCommit" || info.State == "CompleteAbort")
	}, 10*time.Second, time.Millisecond)
}

func committedValues(c *broker.Cluster, topic string, partition int32) []string {
	var out []string
	for _, r := range c.CommittedRecords(topic, partition) {
		out = append(out, string(r.Value))
	}
	return out
}

// txnScenarioBackend is where runTxnScenario reads back what it wrote.
type txnScenarioBackend struct {
	// committed returns what a read_committed consumer reads of a
	// partition of the topic, once the markers of the last transaction
	// are written.
	committed func(partition int32) []string
	// offset returns the committed offset of group "eos" on "in"/0.
	offset func() int64
}

// runTxnScenario drives whole transactions through the protocol calls and
// the core under transaction version tv: init, a committed transaction
// with offsets, an aborted one with offsets, a committed one after it, a
// commit refused after a failed record (then aborted), and a committed
// one after that. A read_committed read finds the committed records once,
// in order, and no aborted one; the offsets of the committed transaction
// are committed, the aborted one's not. Under version 2 every EndTxn bumps
// the epoch and the next transaction starts each partition at sequence 0
// (the broker refuses any other first sequence); under version 1 the
// epoch stays, except for the bump after an abort with a failed record.
func runTxnScenario(t *testing.T, d *txnWireDriver, topic string, tv int, b txnScenarioBackend) {
	p0 := protocol.TopicPartition{Topic: topic, Partition: 0}
	p1 := protocol.TopicPartition{Topic: topic, Partition: 1}
	require.Equal(t, tv, protocol.TxnVersion(d.boot))

	require.NoError(t, d.core.initTransactions())
	require.NoError(t, d.until(txnOpInit))
	startEpoch := d.core.epoch

	// 1: committed, with offsets.
	require.NoError(t, d.core.begin(tv))
	require.NoError(t, d.produce(p0, "a1", "a2"))
	require.NoError(t, d.produce(p1, "b1"))
	require.NoError(t, d.produce(p0, "a3"))
	g := protocol.GroupMetadata{GroupID: "eos", Generation: -1}
	in0 := protocol.TopicPartition{Topic: "in", Partition: 0}
	require.NoError(t, d.core.sendOffsets(g, []protocol.TxnOffset{{TopicPartition: in0, Offset: 42, LeaderEpoch: -1}}))
	require.NoError(t, d.until(txnOpSendOffsets))
	require.NoError(t, d.core.commit())
	require.NoError(t, d.until(txnOpCommit))

	// 2: aborted, with offsets.
	require.NoError(t, d.core.begin(tv))
	require.NoError(t, d.produce(p0, "x1"))
	require.NoError(t, d.produce(p1, "x2", "x3"))
	require.NoError(t, d.core.sendOffsets(g, []protocol.TxnOffset{{TopicPartition: in0, Offset: 99, LeaderEpoch: -1}}))
	require.NoError(t, d.until(txnOpSendOffsets))
	_, err := d.core.abort()
	require.NoError(t, err)
	require.Empty(t, d.core.unsent())
	require.NoError(t, d.until(txnOpAbort))

	// 3: committed after the abort.
	require.NoError(t, d.core.begin(tv))
	require.NoError(t, d.produce(p1, "b2"))
	require.NoError(t, d.core.commit())
	require.NoError(t, d.until(txnOpCommit))

	if tv == 2 {
		require.Equal(t, startEpoch+3, d.core.epoch, "one bump per EndTxn")
		require.Equal(t, 1+3, d.renumbers, "init, then every EndTxn")
	} else {
		require.Equal(t, startEpoch, d.core.epoch, "version 1 keeps the epoch")
		require.Equal(t, 1, d.renumbers, "only init")
	}

	// 4: a record the broker refuses makes the transaction abort-only;
	// commit is refused with its error.
	require.NoError(t, d.core.begin(tv))
	require.NoError(t, d.produce(p0, "ok"))
	d.seq[p1] += 7 // a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
	perr := d.produce(p1, "gap")
	require.ErrorIs(t, perr, kerr.OutOfOrderSequenceNumber)
	err = d.core.commit()
	require.ErrorIs(t, err, ErrTransactionAbortable)
	require.ErrorIs(t, err, kerr.OutOfOrderSequenceNumber)
	_, err = d.core.abort()
	require.NoError(t, err)
	require.NoError(t, d.until(txnOpAbort))
	if tv == 1 {
		require.Equal(t, startEpoch+1, d.core.epoch, "version 1 bumps after an abort with a failed record")
	}

	// 5: the next transaction works on the renumbered epoch.
	require.NoError(t, d.core.begin(tv))
	require.NoError(t, d.produce(p1, "b3"))
	require.NoError(t, d.core.commit())
	require.NoError(t, d.until(txnOpCommit))

	require.Equal(t, []string{"a1", "a2", "a3"}, b.committed(0))
	require.Equal(t, []string{"b1", "b2", "b3"}, b.committed(1))
	require.Equal(t, int64(42), b.offset(), "the aborted transaction's offset is not committed")
}

// TestTxnCoreOnEmbeddedCoordinator runs runTxnScenario against the
// embedded broker's transaction coordinator (three nodes, so the
// coordinators and leaders differ), under transaction versions 1 and 2.
func TestTxnCoreOnEmbeddedCoordinator(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			const topic = "txn-out"
			c, err := broker.Start(broker.Config{Nodes: 3, Topics: []broker.TopicConfig{{Name: topic, Partitions: 2}, {Name: "in", Partitions: 1}}})
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			require.NoError(t, c.SetTransactionVersion(tv))
			var cfg protocol.DialConfig
			if tv == 1 {
				cfg.MaxVersions = map[int16]int16{0: protocol.MaxTV1ProduceVersion}
			}
			d := newTxnWireDriver(t, c.Addr(), cfg, topic, 2)
			runTxnScenario(t, d, topic, int(tv), txnScenarioBackend{
				committed: func(partition int32) []string {
					// The coordinator writes markers after answering EndTxn.
					waitTxnComplete(t, c, d.txnID)
					return committedValues(c, topic, partition)
				},
				offset: func() int64 {
					off, ok := c.CommittedOffset("eos", "in", 0)
					require.True(t, ok)
					return off
				},
			})
		})
	}
}

// TestTxnCoreRenumberMatters is the negative control of the scenario's
// sequence check: a driver that ignores the version 2 epoch bump (keeps
// counting sequences across EndTxn) has its next transaction's first
// batch refused.
func TestTxnCoreRenumberMatters(t *testing.T) {
	const topic = "txn-renumber"
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{{Name: topic, Partitions: 1}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	d := newTxnWireDriver(t, c.Addr(), protocol.DialConfig{}, topic, 1)
	p0 := protocol.TopicPartition{Topic: topic, Partition: 0}
	require.NoError(t, d.core.initTransactions())
	require.NoError(t, d.until(txnOpInit))
	require.NoError(t, d.core.begin(2))
	require.NoError(t, d.produce(p0, "a", "b"))
	kept := d.seq[p0]
	require.NoError(t, d.core.commit())
	require.NoError(t, d.until(txnOpCommit))
	require.Zero(t, d.seq[p0], "the bump renumbered")
	d.seq[p0] = kept // the bug: no renumbering
	require.NoError(t, d.core.begin(2))
	require.ErrorIs(t, d.produce(p0, "c"), kerr.OutOfOrderSequenceNumber)
}

// TestTxnCoreFencedByNewInstance: a second producer of the same
// transactional id initializing fences the first: its next coordinator
// request fails with the fenced class, and its open transaction is
// aborted by the coordinator (no record of it is read).
func TestTxnCoreFencedByNewInstance(t *testing.T) {
	const topic = "txn-fence"
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{{Name: topic, Partitions: 1}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	p0 := protocol.TopicPartition{Topic: topic, Partition: 0}
	old := newTxnWireDriver(t, c.Addr(), protocol.DialConfig{}, topic, 1)
	require.NoError(t, old.core.initTransactions())
	require.NoError(t, old.until(txnOpInit))
	require.NoError(t, old.core.begin(2))
	require.NoError(t, old.produce(p0, "zombie"))

	fresh := newTxnWireDriver(t, c.Addr(), protocol.DialConfig{}, topic, 1)
	require.NoError(t, fresh.core.initTransactions())
	require.NoError(t, fresh.until(txnOpInit)) // CONCURRENT_TRANSACTIONS while it fences, retried
	require.NoError(t, fresh.core.begin(2))
	require.NoError(t, fresh.produce(p0, "live"))
	require.NoError(t, fresh.core.commit())
	require.NoError(t, fresh.until(txnOpCommit))

	require.NoError(t, old.core.commit())
	err = old.until(txnOpCommit)
	require.ErrorIs(t, err, ErrProducerFenced)
	require.Equal(t, txnFenced, old.core.state)
	waitTxnComplete(t, c, fresh.txnID)
	require.Equal(t, []string{"live"}, committedValues(c, topic, 0))
}
