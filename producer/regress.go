package producer

import "github.com/longhaul-kafka/longhaul/internal/testhooks"

func init() {
	testhooks.NoSessionRenewal = Opt(optFunc(func(c *config) error {
		c.regress.noSessionRenewal = true
		return nil
	}))
}

// regressions brings back, one knob each, the bugs of issue 12 for the
// negative controls in regress_test.go, which show that the regression
// tests and the randomized mixed-fault test catch each of them. Only tests
// set them (config.regress); all are false in production.
type regressions struct {
	orderLostLeadingOnly bool // 1: only leading unwritten retries fail as ErrOrderLost
	resolveOldestRetry   bool // 2: during a bump, resend the oldest retry whatever it is
	bumpOnOldBrokers     bool // 3: ask brokers without KIP-360 for an epoch bump
	notLeaderNotWritten  bool // 4: leader errors taken as "certainly not written"
	callbacksUnordered   bool // 5: callbacks released as batches complete
	flushWaitsAll        bool // 6: Flush waits for everything, also later records
	metadataUnchecked    bool // 7: partition lists used without checkPartitions
	// Issue 16: connections are used until the broker ends their SASL
	// session (no KIP-368 renewal), as before; set through
	// testhooks.NoSessionRenewal by the real-Kafka negative control too.
	noSessionRenewal bool
	noControlRenewal bool // only the control connection is not renewed
	idleTick         bool // issue 20: the sender wakes at least once a second, due or not
	visitAll         bool // issue 20: every pass visits every partition holding data
	recordBytesOnly  bool // issue 20: buffer.memory counts record bytes, not buffer capacity
	pollIdleTopics   bool // issue 20: topics are asked for in metadata however long idle
	noCloseCheck     bool // issue 20: a connection the broker closed is noticed only when a send fails
	keepHeldMark     bool // a new open batch inherits the held-linger mark of a withdrawn one (07d9567)
	queueSlides      bool // popQueue slices past the last batch (an allocation per batch, issue 19)
	stickyLeftover   bool // the record that did not fit opens a batch on the old sticky partition, then it moves
	stickyStartAlone bool // a record starting a batch on a due sticky partition is placed there alone, then it moves
	holdAnyRT        bool // issue 19: lingered batches held whatever the response times (a long link too)
	holdUnbounded    bool // issue 19: a held batch waits for a response however long
	expireEveryPass  bool // issue 20: expire walks every active partition in every pass, due or not
	wakeEveryBatch   bool // issue 20: every new batch wakes the sender, whatever its timer
	walkActive       bool // issue 20: every pass looks at every partition holding data under Producer.mu
	handshakeNotRT   bool // issue 19: the handshake's round trip is not the connection's first fastest answer
	releasePerPass   bool // buffer.memory of completions released at the end of the callback goroutine's pass
	// An OUT_OF_ORDER_SEQUENCE_NUMBER (or UNKNOWN_PRODUCER_ID) behind a
	// refused batch is taken as proof that a maybe-written batch is not in
	// the log, so the bump renumbers it (chaos seeds 15697, 28603).
	oooProvesUnwritten bool
	// A batch waiting to be split is split even after a later attempt of
	// it, sent whole, may have been written (chaos seed 48664).
	splitMaybeWritten  bool
	renewalResets      bool // a connection replacing one drained for its SASL renewal resets windows and gates (chaos seed 17356)
	oldTopicHints      bool // KIP-951 hints in answers about a deleted topic's batches applied to the re-created one (chaos seed 58973)
	recreateKeepsEpoch bool // a re-created topic keeps the epoch, its partitions continuing their sequences (chaos seed 150440)
	// A node moved to another address while its connection drained for
	// a SASL renewal: the connection dialed to the new address continues
	// the drained one, windows and gates carried over.
	movedRenewalContinues bool
	// A Produce v3 (Kafka 0.11) leader gets the 5 batches in flight of
	// newer brokers, though it retains only the last one per producer.
	v3Uncapped bool
	// Control requests try known brokers and bootstrap.servers with
	// repeats, each repeat taking a share of the dial budget (chaos seed
	// 59654).
	controlAddrsRepeat bool
	// newBatch keeps a pooled buffer larger than any batch of this
	// producer grows to (left by a producer with a larger batch.size): its
	// capacity counted against buffer.memory, and records placed at once
	// when their topic's metadata came forced many such buffers past it.
	pooledOversize bool
	// Records waiting for their topic's partitions hold only their size
	// of buffer.memory, and their batches take any pooled buffer: placed
	// at once when metadata came, they forced a batch buffer each past it
	// (waitingExtra).
	waitingNoExtra bool
	// An InitProducerId answer giving back the identity the producer had
	// is taken: the batches renumbered from 0 are matched as duplicates
	// of the ones written under it (acked, never written).
	sameIdentityTaken bool
	// A topic's partition list with no partitions passes checkPartitions.
	emptyPartitionsTaken bool
	// The sender goroutine is not told apart: Flush, ProduceSync and Close
	// called from a hook wait for the sender the hook holds (deadlock), and
	// Produce waits for buffer.memory there.
	hookWaitUndetected bool
}
