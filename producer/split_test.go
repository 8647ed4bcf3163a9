package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// splitMemoryRun produces records to parts partitions whose every batch
// the broker refuses as too large (RECORD_LIST_TOO_LARGE, which the
// producer splits but learns no topic limit from, so every batch is built
// to batch.size: topiclimit.go), so each batch is split again and again
// down to single records, which fail alone. It
// samples buffer.memory's bytes held (memBudget.Held) after every Produce
// and in every callback and returns the most, with how many records
// failed as too large.
//
// force, if > 0, is the negative control: from half way through, once
// the bytes held are within force of the bound (Produce fills
// buffer.memory while the refused batches hold it), the test forces that
// many bytes past the limit itself (what the old split did with a pooled
// buffer per half), giving them back at the end. At a fixed record the
// bytes held were at times low enough that the forced ones stayed within
// the bound (1 run in ~100 under load).
func splitMemoryRun(t *testing.T, parts int32, limit int64, batchSize, records, size int, force int64) (most int64, tooLarge int) {
	var mu sync.Mutex
	var other error // the first outcome other than too large
	defer func() {
		if other != nil {
			t.Errorf("a record ended otherwise: %v", other)
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 5 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, BufferMemory(limit), BatchSize(batchSize), Linger(5*time.Millisecond),
			DeliveryTimeout(time.Hour), RequestTimeout(time.Minute), MaxInFlightRequestsPerConnection(5))
		ctx := context.Background()
		require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("warm"))).FirstErr(), "topic known")
		for part := range parts {
			c.InjectError("t", part, kerr.RecordListTooLarge.Code, 1<<30)
		}
		sample := func() {
			h := p.mem.Held()
			mu.Lock()
			most = max(most, h)
			mu.Unlock()
		}
		forced := false
		var wg sync.WaitGroup
		for i := range records {
			wg.Add(1)
			p.Produce(ctx, toPartition("t", int32(i)%parts, make([]byte, size)), func(_ *Record, err error) {
				sample()
				mu.Lock()
				if errors.Is(err, kerr.RecordListTooLarge) {
					tooLarge++
				} else if other == nil {
					other = err
				}
				mu.Unlock()
				wg.Done()
			})
			if force > 0 && !forced && i >= records/2 && p.mem.Held() > limit+int64(batchSize)-force {
				p.mem.Force(force)
				forced = true
			}
			sample()
		}
		require.Equal(t, force > 0, forced, "the bytes held came within force of the bound")
		wg.Wait()
		// The callback goroutine gives a batch's bytes back after its
		// callbacks, so the last release may still be on its way when
		// wg.Wait returns (seen under -race on a loaded machine): wait
		// until it is idle.
		synctest.Wait()
		if forced {
			p.mem.Release(force)
		}
		require.True(t, memoryReleased(p), "every byte back once every callback ran")
	})
	return most, tooLarge
}

// TestSplitKeepsBufferMemoryBound: splitting a batch the broker refused as
// too large must not take buffer.memory past its bound, buffer.memory
// plus one batch buffer (what a batch buffer's growth, which cannot wait,
// may force past it before releases pay it back). 32 partitions,
// buffer.memory 128 KiB, batch.size 4 KiB, every batch refused: each
// split used to give both halves a new buffer, forced past the limit on
// the sender goroutine, and the producer held up to 157,814 bytes against
// the bound of 135,168.
func TestSplitKeepsBufferMemoryBound(t *testing.T) {
	const limit, batchSize = 128 << 10, 4 << 10
	poolBuffers(t, 256, keepBuffer) // what earlier tests of the process may leave
	for _, force := range []int64{0, 2 * batchSize} {
		t.Run(map[bool]string{true: "split", false: "negative-control"}[force == 0], func(t *testing.T) {
			most, tooLarge := splitMemoryRun(t, 32, limit, batchSize, 2000, 100, force)
			t.Logf("held at most %d bytes of a bound of %d; %d records failed as too large", most, limit+batchSize, tooLarge)
			require.Equal(t, 2000, tooLarge, "every record was split down to itself and failed alone")
			if force > 0 {
				require.Greater(t, most, int64(limit+batchSize), "negative control: the sampling sees bytes forced past the bound")
				return
			}
			require.LessOrEqual(t, most, int64(limit+batchSize), "buffer.memory plus one batch buffer")
		})
	}
}

// TestTooLargeBatchIsSplit: a batch the broker refuses as MESSAGE_TOO_LARGE
// is split into halves with the same sequence range until each fits; no
// record fails, no epoch bump, and the log is exactly once in order.
func TestTooLargeBatchIsSplit(t *testing.T) {
	c := startCluster(t, broker.Config{RTT: 5 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, BatchSize(16<<10), Linger(20*time.Millisecond), MaxInFlightRequestsPerConnection(20))
	tr := newTracker(t, "a")
	tr.produce(p, "t", 0, 0, 200, 100)
	tr.wait()
	// The next two batches are refused whole; their halves go through.
	c.InjectError("t", 0, 10 /* MESSAGE_TOO_LARGE */, 2)
	tr.produce(p, "t", 0, 200, 400, 100)
	tr.wait()
	tr.requireClean(t, c, "t", 0)
	require.Empty(t, tr.failed)
	require.Zero(t, p.s.bumps.Load(), "a split keeps the sequence range: no bump")
}
