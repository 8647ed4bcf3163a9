package producer

// A knob brings back one fixed bug, so that a negative control can show
// the test written for that bug fails with it back. Knobs exist only in
// builds with the longhaul_regress tag (regress_on.go): in the default
// build regressions is empty and its on method is the constant false
// (regress_off.go), so the compiler removes every branch that reads a knob
// and nothing of them is in what users run. The negative controls are test
// files with the tag; DESIGN.md ("Negative controls") lists them. A bug of
// the error matrix comes back as a matrix with its row or rule swapped
// (regressions.judgeMatrix, judge_variants_test.go), not as a knob.
type knob uint8

const (
	resolveOldestRetry knob = iota // during a bump, resend the oldest retry whatever it is
	bumpOnOldBrokers               // ask brokers without KIP-360 for an epoch bump
	callbacksUnordered             // callbacks released as batches complete
	flushWaitsAll                  // Flush waits for everything, also later records
	metadataUnchecked              // partition lists used without checkPartitions
	noSessionRenewal               // connections used until the broker ends their SASL session (no KIP-368 renewal)
	noControlRenewal               // only the control connection is not renewed
	recordBytesOnly                // buffer.memory counts record bytes, not buffer capacity
	pollIdleTopics                 // topics are asked for in metadata however long idle
	noCloseCheck                   // a connection the broker closed is noticed only when a send fails
	keepHeldMark                   // a new open batch inherits the held-linger mark of a withdrawn one
	stickyLeftover                 // the record that did not fit opens a batch on the old sticky partition, then it moves
	stickyStartAlone               // a record starting a batch on a due sticky partition is placed there alone, then it moves
	holdUnbounded                  // a held batch waits for a response however long
	releasePerPass                 // buffer.memory of completions released at the end of the callback goroutine's pass
	renewalResets                  // a connection replacing one drained for its SASL renewal resets windows and gates
	oldTopicHints                  // KIP-951 hints in answers about a deleted topic's batches applied to the re-created one
	recreateKeepsEpoch             // a re-created topic keeps the epoch, its partitions continuing their sequences
	// A node moved to another address while its connection drained for
	// a SASL renewal: the connection dialed to the new address continues
	// the drained one, windows and gates carried over.
	movedRenewalContinues
	// A Produce v3 (Kafka 0.11) leader gets the 5 batches in flight of
	// newer brokers, though it retains only the last one per producer.
	v3Uncapped
	// Control requests try known brokers and bootstrap.servers with
	// repeats, each repeat taking a share of the dial budget.
	controlAddrsRepeat
	// newBatch keeps a pooled buffer larger than any batch of this
	// producer grows to (left by a producer with a larger batch.size): its
	// capacity counted against buffer.memory, and records placed at once
	// when their topic's metadata came forced many such buffers past it.
	pooledOversize
	// Records waiting for their topic's partitions hold only their size
	// of buffer.memory, and their batches take any pooled buffer: placed
	// at once when metadata came, they forced a batch buffer each past it
	// (waitingExtra).
	waitingNoExtra
	// An InitProducerId answer giving back the identity the producer had
	// is taken: the batches renumbered from 0 are matched as duplicates
	// of the ones written under it (acked, never written).
	sameIdentityTaken
	emptyPartitionsTaken // a topic's partition list with no partitions passes checkPartitions
	// The sender goroutine is not told apart: Flush, ProduceSync and Close
	// called from a hook wait for the sender the hook holds (deadlock), and
	// Produce waits for buffer.memory there.
	hookWaitUndetected
	memUnbounded      // memBudget's take does not check the free bytes
	memForceKeepsFree // memBudget's Force owes all of n when it does not fit, leaving free as it was
	memSharedDebt     // memBudget's TakeOrOwe lets every caller owe, sharing the debt's room
	readbackNoFence   // read-back reads a batch of unknown fate at once, without waiting for the fence
	readbackSeqOnly   // read-back matches a batch by its base sequence alone
	readbackKAfter    // the ListOffsets giving a first batch's K goes after its Produce request
	throttleIgnored   // a throttled answer (KIP-219) holds nothing: sends go on into the muted connection
	// A KIP-951 hint naming a node without an address is taken, and its
	// epoch makes metadata naming the reachable leader stale.
	hintUnreachable
	// Inside a transaction the idempotent recovery runs: an epoch bump,
	// renumbering or a rewind after a failed record.
	txnRecovers
	// Version 1 transactions send Produce at the connection's version,
	// v12+ included.
	txnTV1Uncapped
	// EndTxn goes without waiting for the transaction's records:
	// CommitTransaction does not flush first, and the driver forgets what
	// is in flight.
	txnEndEarly
	// The gate never re-arms at a version 2 transaction's epoch bump,
	// whatever the leader's Produce version.
	txnGateNeverRearmed
	// CommitTransaction commits after a failed record: the driver hides
	// record failures from the core.
	txnCommitAfterFailed
	// A transaction that can only be aborted goes on sending: its
	// batches waiting for retry and the halves of its splits are sent
	// again, and a batch answered with a retriable error is retried.
	txnSendsAbortOnly

	numKnobs
)

// The knobs must fit in the longhaul_regress build's 64 bits.
var _ [64 - numKnobs]struct{}
