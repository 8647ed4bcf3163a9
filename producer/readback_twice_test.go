package producer

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestReadbackSettlesWrittenTwice: a broker that forgot the producer's
// state between two attempts of batch B (KIP-854 expiration) appends both,
// and answers each with an error until delivery.timeout.ms makes B's fate
// unknown. Once the next batch C is acknowledged under the bumped epoch,
// read-back finds B's identity at two offsets: the record's callback gets
// ErrWrittenTwice naming both (not fate unknown: the log says what
// happened) and the record's Offset is its offset in the first copy, the
// hook and Stats count it, and both offsets hold B.
func TestReadbackSettlesWrittenTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &readbackHook{}
		var mu sync.Mutex
		twiceAt := map[int64]bool{} // the Offset of each record failed with ErrWrittenTwice, as its callback sees it
		offsets := recordDoneFunc(func(r *Record, err error) {
			if errors.Is(err, ErrWrittenTwice) {
				mu.Lock()
				twiceAt[r.Offset] = true
				mu.Unlock()
			}
		})
		keys := &requestKeys{}
		c, p, l := warmWindow20(t, 1, Linger(0), ReadBack(true), Hooks(h, offsets, keys))
		keys.p.Store(p)
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.RequestTimedOut.Code, Mode: broker.AppendThenFail},
			broker.Answer{Code: kerr.RequestTimedOut.Code, Mode: broker.AppendThenFail})
		l.produce(p, 0, 1, 100) // B
		// The first attempt is appended and answered with an error; the
		// broker then forgets the producer, so the retry is appended again.
		waitAnswers := func(left int) {
			t.Helper()
			for deadline := time.Now().Add(time.Minute); c.PendingAnswers("t", 0) > left; time.Sleep(time.Millisecond) {
				require.True(t, time.Now().Before(deadline), "attempt %d of B never reached the broker", 2-left)
			}
		}
		waitAnswers(1)
		c.ExpireProducerIDs()
		waitAnswers(0)
		c.InjectError("t", 0, kerr.RequestTimedOut.Code, 100000)
		time.Sleep(p.cfg.deliveryTimeout + time.Second)
		c.InjectError("t", 0, 0, 0)
		l.produce(p, 0, 1, 100) // C, the fence
		require.True(t, l.waitAll(time.Minute), "callbacks")

		const b = 200 // warmUp's records come first
		err := recordErr(t, l, 0, b)
		require.ErrorIs(t, err, ErrWrittenTwice)
		require.ErrorContains(t, err, fmt.Sprintf("at offsets %d and %d", b, b+1))
		require.False(t, IsFateUnknown(err), "the log settled it")
		mu.Lock()
		require.Equal(t, map[int64]bool{b: true}, twiceAt, "Offset: the first copy's")
		mu.Unlock()
		require.NoError(t, recordErr(t, l, 0, b+1), "C")
		infos := h.all()
		require.Len(t, infos, 1)
		require.Equal(t, ReadbackWrittenTwice, infos[0].Outcome)
		require.Equal(t, []int64{b, b + 1}, infos[0].Offsets)
		readbackAt(t, c, infos[0])
		require.Equal(t, ReadbackStats{WrittenTwice: 1}, p.Stats().Readback)
		require.Positive(t, keys.count()[1], "read-back's Fetch requests reported to HookRequestDone")
	})
}
