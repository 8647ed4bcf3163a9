// Command eos is exactly-once processing with longhaul: a
// consume-transform-produce service. A franz-go (kgo) consumer group reads
// an input topic read_committed; each record is transformed (its value
// upper-cased, its input partition and offset appended) and produced to
// the same partition of an output topic by a transactional longhaul
// producer; the consumed offsets go into the same transaction with the
// consumer's group metadata (KIP-447), and the transaction commits every
// -commit-every records or -commit-interval, whichever comes first. So
// the output holds each input record's transform exactly once, in input
// order per partition, whatever crashes: a transaction commits its output
// and its offsets together or neither.
//
// A restarted instance starts cleanly: InitTransactions, before the
// consumer joins the group, fences the previous instance with the same
// -transactional-id and waits until the coordinator has aborted its open
// transaction, and the consumer then resumes at the offsets of the last
// committed transaction (kgo reads them with RequireStable). The
// consumer is a static member (-instance-id), so the restarted instance
// takes over the old one's partitions at once instead of waiting for its
// session to time out.
//
// Run it with
//
//	go run ./examples/eos
//
// to start longhaul's embedded broker in-process, write -records input
// records, process them until the input is idle for -idle-exit, and check
// the output read_committed. Against a cluster (input and output topics
// are created with -partitions when missing; the output needs at least as
// many partitions as the input):
//
//	go run ./examples/eos -brokers localhost:9092 -input in -output out
//
// runs until interrupted (or idle for -idle-exit, if set). Each committed
// transaction prints one line. Exit status: 0 done, 1 failed (a fenced or
// failed producer, an output that does not match), 2 bad flags, 130
// interrupted (the open transaction is aborted).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/internal/topicadmin"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func main() { cli.Main(run) }

type options struct {
	brokers        string
	input, output  string
	group          string
	txnID          string
	instanceID     string
	commitEvery    int
	commitInterval time.Duration
	idleExit       time.Duration
	records        int // embedded broker only
	partitions     int
	window         int // embedded broker only
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("eos", "Consumes a topic, transforms each record and produces it exactly once (transactions with the consumer's offsets).\n", stderr)
	fs.StringVar(&o.brokers, "brokers", "", "`host:port[,...]` of a cluster; empty starts the embedded broker in-process and fills the input")
	fs.StringVar(&o.input, "input", "eos-in", "topic to consume")
	fs.StringVar(&o.output, "output", "eos-out", "topic to produce to")
	fs.StringVar(&o.group, "group", "eos", "consumer group")
	fs.StringVar(&o.txnID, "transactional-id", "eos-1", "the producer's transactional.id: a restarted instance must use the same")
	fs.StringVar(&o.instanceID, "instance-id", "", "the consumer's group.instance.id (static membership); empty means the transactional id")
	fs.IntVar(&o.commitEvery, "commit-every", 100, "commit after this many records")
	fs.DurationVar(&o.commitInterval, "commit-interval", 100*time.Millisecond, "commit a transaction this long after it began, even with fewer records")
	fs.DurationVar(&o.idleExit, "idle-exit", 0, "exit once no record arrived for this long and nothing is uncommitted; 0 runs until interrupted (the embedded broker: 2s)")
	fs.IntVar(&o.records, "records", 3000, "embedded broker only: input records to write before processing")
	fs.IntVar(&o.partitions, "partitions", 3, "partitions of the topics when they are created")
	fs.IntVar(&o.window, "window", 50, "embedded broker only: the output topic's producer.state.batches.to.retain (>= 5)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.instanceID == "" {
		o.instanceID = o.txnID
	}
	if o.brokers == "" && o.idleExit == 0 {
		o.idleExit = 2 * time.Second
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.input == "" || o.output == "" || o.input == o.output:
		return o, fmt.Errorf("-input %q, -output %q: both required and different", o.input, o.output)
	case o.group == "" || o.txnID == "":
		return o, errors.New("-group and -transactional-id must not be empty")
	case o.commitEvery < 1:
		return o, fmt.Errorf("-commit-every %d: must be at least 1", o.commitEvery)
	case o.commitInterval <= 0:
		return o, fmt.Errorf("-commit-interval %v: must be positive", o.commitInterval)
	case o.idleExit < 0:
		return o, fmt.Errorf("-idle-exit %v: must not be negative", o.idleExit)
	case o.records < 0:
		return o, fmt.Errorf("-records %d: must not be negative", o.records)
	case o.partitions < 1 || o.partitions > 1000:
		return o, fmt.Errorf("-partitions %d: must be 1..1000", o.partitions)
	case o.window < 5:
		return o, fmt.Errorf("-window %d: must be at least 5", o.window)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if status, done := cli.FlagsDone("eos", err, stderr); done {
		return status
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "eos: %v\n", err)
		if ctx.Err() != nil {
			return cli.ExitInterrupted
		}
		return cli.ExitFailed
	}
	var bootstrap []string
	if o.brokers == "" {
		c, err := startEmbedded(ctx, o, stdout)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		bootstrap = []string{c.Addr()}
	} else {
		bootstrap = strings.Split(o.brokers, ",")
		if err := ensureTopics(ctx, o, bootstrap, stdout); err != nil {
			return fail(err)
		}
	}
	if err := process(ctx, o, bootstrap, stdout); err != nil {
		return fail(err)
	}
	if o.brokers == "" {
		if err := checkOutput(ctx, bootstrap, o.input, o.output, o.records, stdout); err != nil {
			return fail(err)
		}
	}
	return cli.ExitOK
}

// transform is the processing step: the value upper-cased, then where it
// came from, so that the output shows any duplicate, loss or reordering.
func transform(r *kgo.Record) []byte {
	return fmt.Appendf(bytes.ToUpper(r.Value), " @%d:%d", r.Partition, r.Offset)
}

// startEmbedded starts the embedded broker with both topics and writes
// the input records (idempotent, not transactional: they are committed as
// soon as they are written).
func startEmbedded(ctx context.Context, o options, stdout io.Writer) (*producertest.Cluster, error) {
	c, err := producertest.Start(1,
		producertest.Topic{Name: o.input, Partitions: int32(o.partitions)},
		producertest.Topic{Name: o.output, Partitions: int32(o.partitions), Window: o.window})
	if err != nil {
		return nil, fmt.Errorf("start embedded broker: %w", err)
	}
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.ClientID("longhaul-eos-input"))
	if err != nil {
		c.Close()
		return nil, err
	}
	recs := make([]*producer.Record, o.records)
	for i := range recs {
		recs[i] = &producer.Record{Topic: o.input, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "record %d", i)}
	}
	err = p.ProduceSync(ctx, recs...).FirstErr()
	if cerr := p.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("write the input: %w", err)
	}
	fmt.Fprintf(stdout, "embedded broker on %s: %d records in %s, %d partitions; output %s (producer.state.batches.to.retain=%d)\n",
		c.Addr(), o.records, o.input, o.partitions, o.output, o.window)
	return c, nil
}

// ensureTopics creates the input and output topics when missing.
func ensureTopics(ctx context.Context, o options, bootstrap []string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := topicadmin.Ensure(ctx, topicadmin.Config{Bootstrap: bootstrap}, []topicadmin.Topic{
		{Name: o.input, Partitions: int32(o.partitions)},
		{Name: o.output, Partitions: int32(o.partitions)},
	})
	if err != nil {
		return err
	}
	if res[1].Partitions < res[0].Partitions {
		return fmt.Errorf("output %s has %d partitions, fewer than input %s (%d): input partition p goes to output partition p",
			o.output, res[1].Partitions, o.input, res[0].Partitions)
	}
	return nil
}

// errRewind says the transaction was aborted: its records will be
// consumed again, from the group's committed offsets.
var errRewind = errors.New("transaction aborted; rewinding to the committed offsets")

// process runs the pipeline until ctx ends, the input is idle for
// o.idleExit, or the producer fails.
func process(ctx context.Context, o options, bootstrap []string, stdout io.Writer) error {
	p, err := producer.New(
		producer.BootstrapServers(bootstrap...),
		producer.ClientID("longhaul-eos"),
		producer.TransactionalID(o.txnID),
		// As many requests per connection as the learned window lets
		// the partitions have in flight; Kafka's default of 5 caps them.
		producer.MaxInFlightRequestsPerConnection(64),
	)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(cctx)
	}()
	// Before the consumer joins: fence the previous instance and let the
	// coordinator abort its open transaction, so the offsets read next
	// are the last committed ones.
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = p.InitTransactions(ictx)
	cancel()
	if err != nil {
		return fmt.Errorf("init transactions: %w", err)
	}
	fmt.Fprintf(stdout, "transactional id %s initialized; any previous instance is fenced\n", o.txnID)
	s := &session{o: o, p: p, stdout: stdout, lastRecord: time.Now()}
	for {
		err := s.consume(ctx, bootstrap)
		if !errors.Is(err, errRewind) {
			fmt.Fprintf(stdout, "processed %d records in %d transactions (%d aborted)\n", s.records, s.committed, s.aborted)
			return err
		}
		fmt.Fprintf(stdout, "%v\n", err)
	}
}

// session is one instance's state across consumer restarts.
type session struct {
	o      options
	p      *producer.Producer
	stdout io.Writer

	committed, aborted, records int
	lastRecord                  time.Time
}

// txn is the open transaction: its record count, start and the offsets
// to commit with it (the next offset to consume, per partition).
type txn struct {
	began   time.Time
	records int
	offsets map[int32]producer.TransactionOffset
}

func (s *session) newConsumer(bootstrap []string) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(bootstrap...),
		kgo.ClientID("longhaul-eos"),
		kgo.ConsumerGroup(s.o.group),
		kgo.InstanceID(s.o.instanceID),
		kgo.ConsumeTopics(s.o.input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// kgo fetches committed offsets with RequireStable (KIP-447):
		// offsets still pending in a transaction are waited for, not read
		// as the previous ones.
		kgo.DisableAutoCommit(),
		// No rebalance between a poll and the commit of what it
		// returned: a transaction's offsets belong to one generation.
		kgo.BlockRebalanceOnPoll(),
	)
}

// consume processes records with a fresh consumer until ctx ends, the
// input is idle, or a transaction fails; an aborted transaction returns
// errRewind.
func (s *session) consume(ctx context.Context, bootstrap []string) error {
	cl, err := s.newConsumer(bootstrap)
	if err != nil {
		return err
	}
	defer cl.Close()
	var open *txn
	for {
		wait, room := s.o.commitInterval, s.o.commitEvery
		if open != nil {
			wait = max(time.Millisecond, s.o.commitInterval-time.Since(open.began))
			room -= open.records
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollRecords(pctx, room)
		cancel()
		if ctx.Err() != nil {
			if open != nil {
				actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := s.p.AbortTransaction(actx)
				cancel()
				if err != nil {
					return fmt.Errorf("abort at interrupt: %w", err)
				}
			}
			return ctx.Err()
		}
		if err := fetchError(fs); err != nil {
			return err
		}
		var produceErr error
		fs.EachRecord(func(r *kgo.Record) {
			if produceErr != nil {
				return
			}
			if open == nil {
				if produceErr = s.p.BeginTransaction(); produceErr != nil {
					return
				}
				open = &txn{began: time.Now(), offsets: map[int32]producer.TransactionOffset{}}
			}
			out := &producer.Record{Topic: s.o.output, Key: r.Key, Value: transform(r)}
			out.SetPartition(r.Partition)
			// A failed record fails the commit; nothing to do per record.
			s.p.Produce(ctx, out, nil)
			open.records++
			open.offsets[r.Partition] = producer.TransactionOffset{
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset + 1, LeaderEpoch: r.LeaderEpoch,
			}
			s.lastRecord = time.Now()
		})
		if produceErr != nil {
			return fmt.Errorf("begin transaction: %w", produceErr)
		}
		if open != nil && (open.records >= s.o.commitEvery || time.Since(open.began) >= s.o.commitInterval) {
			if err := s.commit(ctx, cl, open); err != nil {
				return err
			}
			open = nil
		}
		if open == nil {
			cl.AllowRebalance()
			if s.o.idleExit > 0 && time.Since(s.lastRecord) >= s.o.idleExit {
				return nil
			}
		}
	}
}

// commit sends t's offsets with the consumer's group metadata and commits.
// An abortable failure aborts and returns errRewind; anything else (fenced,
// fatal, outcome unknown) ends the instance: a restart sorts it out.
func (s *session) commit(ctx context.Context, cl *kgo.Client, t *txn) error {
	member, generation := cl.GroupMetadata()
	group := producer.GroupMetadata{GroupID: s.o.group, Generation: generation, MemberID: member, InstanceID: &s.o.instanceID}
	offsets := make([]producer.TransactionOffset, 0, len(t.offsets))
	for _, off := range t.offsets {
		offsets = append(offsets, off)
	}
	err := s.p.SendOffsetsToTransaction(ctx, group, offsets)
	if err == nil {
		err = s.p.CommitTransaction(ctx)
	}
	switch {
	case err == nil:
		s.committed++
		s.records += t.records
		fmt.Fprintf(s.stdout, "committed transaction %d: %d records (%d in all)\n", s.committed, t.records, s.records)
		return nil
	case errors.Is(err, producer.ErrTransactionAbortable):
		if aerr := s.p.AbortTransaction(ctx); aerr != nil {
			return fmt.Errorf("abort after %v: %w", err, aerr)
		}
		s.aborted++
		return fmt.Errorf("%w (%v)", errRewind, err)
	default:
		return fmt.Errorf("commit: %w", err)
	}
}

// fetchError returns the first fetch error that is not the poll's own
// timeout.
func fetchError(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
			continue
		}
		return fmt.Errorf("consume %s/%d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// readAll reads topic from the start with an independent read_committed
// consumer until want records arrived and a second passed with nothing
// more (so a record too many shows), or until ctx ends.
func readAll(ctx context.Context, bootstrap []string, topic string, want int) (map[int32][]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[int32][]*kgo.Record{}
	n := 0
	for {
		wait := time.Second
		if n < want {
			wait = 10 * time.Second
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return got, fmt.Errorf("read %s: %d of %d records: %w", topic, n, want, ctx.Err())
		}
		if err := fetchError(fs); err != nil {
			return got, err
		}
		k := 0
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r); k++ })
		n += k
		if k == 0 && n >= want {
			return got, nil
		}
	}
}

// compareOutput checks that out holds, per partition, exactly the
// transform of each in record, once, in input order.
func compareOutput(in, out map[int32][]*kgo.Record) error {
	var errs []error
	for part := range out {
		if _, ok := in[part]; !ok {
			errs = append(errs, fmt.Errorf("output partition %d: %d records, no input", part, len(out[part])))
		}
	}
	for part, recs := range in {
		o := out[part]
		for i, r := range recs {
			if i >= len(o) {
				errs = append(errs, fmt.Errorf("partition %d: %d of %d records missing, first %q", part, len(recs)-i, len(recs), transform(r)))
				break
			}
			if want := transform(r); !bytes.Equal(o[i].Value, want) {
				errs = append(errs, fmt.Errorf("partition %d, output offset %d: %q, want %q", part, o[i].Offset, o[i].Value, want))
				break
			}
		}
		if len(o) > len(recs) {
			errs = append(errs, fmt.Errorf("partition %d: %d records too many, first %q", part, len(o)-len(recs), o[len(recs)].Value))
		}
	}
	return errors.Join(errs...)
}

// checkOutput reads the n input records and the output read_committed
// and compares them.
func checkOutput(ctx context.Context, bootstrap []string, input, output string, n int, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	in, err := readAll(ctx, bootstrap, input, n)
	if err != nil {
		return err
	}
	out, err := readAll(ctx, bootstrap, output, n)
	if err != nil {
		return err
	}
	if err := compareOutput(in, out); err != nil {
		return fmt.Errorf("output does not match the input: %w", err)
	}
	fmt.Fprintf(stdout, "output checked read_committed: the transform of each of the %d input records, once, in order\n", n)
	return nil
}
