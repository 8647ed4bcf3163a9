package producer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicRows is the Metadata topic-level matrix as named cases (issue 34);
// DESIGN.md "Metadata answers" gives each row's reason.
var topicRows = []struct {
	name string
	code int16
	want metaAct
}{
	{"no error: take", 0, metaTake},
	{"INVALID_TOPIC_EXCEPTION: the name can never exist", kerr.InvalidTopicException.Code, metaFail},
	{"TOPIC_AUTHORIZATION_FAILED: asking again grants nothing", kerr.TopicAuthorizationFailed.Code, metaFail},
	{"UNKNOWN_TOPIC_OR_PARTITION: being created, or a broker not caught up", kerr.UnknownTopicOrPartition.Code, metaWait},
	{"LEADER_NOT_AVAILABLE: created, leaders not elected yet", kerr.LeaderNotAvailable.Code, metaWait},
	{"UNKNOWN_TOPIC_ID: a by-id answer; ask again by name", kerr.UnknownTopicID.Code, metaWait},
	{"INVALID_REPLICATION_FACTOR: too few live brokers for now", kerr.InvalidReplicationFactor.Code, metaWait},
	{"INVALID_PARTITIONS: the broker's num.partitions refuses it every time", kerr.InvalidPartitions.Code, metaFail},
	{"POLICY_VIOLATION: the creation policy refuses it every time", kerr.PolicyViolation.Code, metaFail},
	{"INVALID_CONFIG: the broker's topic configs refuse it every time", kerr.InvalidConfig.Code, metaFail},
	{"THROTTLING_QUOTA_EXCEEDED: the controller mutation quota, for now", kerr.ThrottlingQuotaExceeded.Code, metaWait},
	{"TOPIC_ALREADY_EXISTS: created meanwhile", kerr.TopicAlreadyExists.Code, metaWait},
	{"NOT_CONTROLLER: the controller moves", kerr.NotController.Code, metaWait},
	{"REQUEST_TIMED_OUT: the creation is slow", kerr.RequestTimedOut.Code, metaWait},
}

// TestTopicVerdict: every row of topicCodes has its case, and a code the
// table does not list waits.
func TestTopicVerdict(t *testing.T) {
	seen := map[int16]bool{}
	for _, r := range topicRows {
		t.Run(r.want.String()+": "+r.name, func(t *testing.T) {
			assert.Equal(t, r.want, topicVerdict(r.code))
		})
		seen[r.code] = true
	}
	for code := range topicCodes {
		assert.True(t, seen[code], "code %d (%v) has no case", code, kerr.ErrorForCode(code))
	}
	assert.Equal(t, metaWait, topicVerdict(-2), "an unknown code waits")
	assert.Equal(t, metaWait, topicVerdict(kerr.UnknownServerError.Code))
	assert.Equal(t, "metaAct(?)", metaAct(9).String())
}

func TestPartitionUsable(t *testing.T) {
	assert.True(t, partitionUsable(0))
	assert.True(t, partitionUsable(kerr.ReplicaNotAvailable.Code), "a follower is down: the leader is fine")
	assert.False(t, partitionUsable(kerr.LeaderNotAvailable.Code))
	assert.False(t, partitionUsable(kerr.ListenerNotFound.Code))
	assert.False(t, partitionUsable(-2))
}

// TestTopicVerdictApplied: each row, answered by the broker for a topic
// (through a relay), does what the row says to a ProduceSync: take
// delivers, fail fails at once with ErrTopicMetadata wrapping the code
// (never sent), wait fails at max.block.ms with the same wrapping; another
// topic in the same call is delivered.
func TestTopicVerdictApplied(t *testing.T) {
	const maxBlock = 20 * time.Second
	for _, r := range topicRows {
		t.Run(r.want.String()+": "+r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "x", Partitions: 1}, {Name: "ok", Partitions: 1}}})
				addr := metadataProxy(t, n, c.Addr(), func(md *kmsg.MetadataResponse) {
					for i := range md.Topics {
						if tp := &md.Topics[i]; tp.Topic != nil && *tp.Topic == "x" && r.code != 0 {
							tp.ErrorCode = r.code
							tp.Partitions = nil
						}
					}
				})
				p := memProducer(t, c, n, BootstrapServers(addr), MaxBlock(maxBlock), DeliveryTimeout(time.Minute))
				start := time.Now()
				res := p.ProduceSync(t.Context(), &Record{Topic: "x", Value: []byte("v")}, &Record{Topic: "ok", Value: []byte("w")})
				took := time.Since(start)
				require.NoError(t, res[1].Err, "another topic goes on")
				err := res[0].Err
				switch r.want {
				case metaTake:
					require.NoError(t, err)
					assert.Len(t, c.Records("x", 0), 1)
					return
				case metaFail:
					assert.Less(t, took, time.Second, "at once (virtual time)")
				case metaWait:
					assert.GreaterOrEqual(t, took, maxBlock, "waits max.block.ms")
				}
				require.ErrorIs(t, err, ErrTopicMetadata)
				require.ErrorIs(t, err, kerr.ErrorForCode(r.code))
				var de *DeliveryError
				require.ErrorAs(t, err, &de)
				assert.False(t, de.FateUnknown, "never sent")
				assert.Empty(t, c.Records("x", 0))
			})
		})
	}
}

// TestPartitionVerdictApplied: a partition entry with REPLICA_NOT_AVAILABLE
// is used as it is; one with LEADER_NOT_AVAILABLE (no leader named) holds
// the record until an answer names the leader, which is asked for again
// after the backoff. Only answers naming the topic count: the producer's
// first request asks for no topic when the sender runs before ProduceSync
// registers it (seen under -race at load 15-35, "used at once" got 2), so
// each case runs in both orders, the sender first forced by waiting for it
// to go idle before producing.
func TestPartitionVerdictApplied(t *testing.T) {
	for _, code := range []int16{kerr.ReplicaNotAvailable.Code, kerr.LeaderNotAvailable.Code, kerr.ListenerNotFound.Code} {
		for _, senderFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/senderFirst=%v", kerr.ErrorForCode(code), senderFirst), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
					var answers, all atomic.Int32
					addr := metadataProxy(t, n, c.Addr(), func(md *kmsg.MetadataResponse) {
						all.Add(1)
						named := false
						for i := range md.Topics {
							named = named || md.Topics[i].Topic != nil && *md.Topics[i].Topic == "t"
						}
						if !named {
							return
						}
						k := answers.Add(1)
						for i := range md.Topics {
							for j := range md.Topics[i].Partitions {
								pm := &md.Topics[i].Partitions[j]
								if k <= 3 || code == kerr.ReplicaNotAvailable.Code {
									pm.ErrorCode = code
									if code != kerr.ReplicaNotAvailable.Code {
										pm.Leader = -1
									}
								}
							}
						}
					})
					p := memProducer(t, c, n, BootstrapServers(addr))
					if senderFirst {
						synctest.Wait()
						require.Equal(t, int32(1), all.Load(), "the sender asked for no topic first")
						require.Zero(t, answers.Load())
					}
					res := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("v")})
					require.NoError(t, res[0].Err)
					if code == kerr.ReplicaNotAvailable.Code {
						assert.Equal(t, int32(1), answers.Load(), "used at once")
					} else {
						assert.Greater(t, answers.Load(), int32(3), "asked again until a leader was named")
					}
				})
			})
		}
	}
}

// TestMistypedTopicFailsAtOnce: a topic name Kafka refuses (a space, a
// '!', 250 characters) fails ProduceSync at once, not after max.block.ms
// (60 s by default), with or without auto-creation: the embedded broker
// answers INVALID_TOPIC_EXCEPTION as Kafka does.
func TestMistypedTopicFailsAtOnce(t *testing.T) {
	for _, auto := range []bool{false, true} {
		for _, name := range []string{"my topic", "orders!", strings.Repeat("t", 250)} {
			t.Run(fmt.Sprintf("auto=%v/%.12s", auto, name), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c, n := memCluster(t, broker.Config{AutoCreateTopics: auto})
					p := memProducer(t, c, n, Property("allow.auto.create.topics", strconv.FormatBool(auto)), DeliveryTimeout(2*time.Minute))
					start := time.Now()
					res := p.ProduceSync(t.Context(), &Record{Topic: name, Value: []byte("v")})
					took := time.Since(start)
					require.ErrorIs(t, res[0].Err, ErrTopicMetadata)
					require.ErrorIs(t, res[0].Err, kerr.InvalidTopicException)
					assert.Less(t, took, time.Second, "at once, not at max.block.ms (virtual time)")
					assert.Zero(t, c.Partitions(name), "not created")
				})
			})
		}
	}
}

// TestDeadTopicPolledAtMaxAge: once every record of a topic the broker
// does not have has failed (max.block.ms), the topic is asked for at the
// periodic refresh only (metadata.max.age.ms), not at the backoff's pace,
// until metadata.max.idle.ms forgets it; while records wait, it is asked
// for with backoff. Before, it was asked for once per retry.backoff.max.ms
// for the idle 5 minutes: 297 requests here, 3 now.
func TestDeadTopicPolledAtMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "live", Partitions: 1}}})
		var mu sync.Mutex
		var dead []int // minutes (since the failure) of Metadata answers naming "gone"
		var failedAt time.Time
		addr := metadataProxy(t, n, c.Addr(), func(md *kmsg.MetadataResponse) {
			mu.Lock()
			defer mu.Unlock()
			for _, tp := range md.Topics {
				if tp.Topic != nil && *tp.Topic == "gone" && !failedAt.IsZero() {
					dead = append(dead, int(time.Since(failedAt)/time.Minute))
				}
			}
		})
		p := memProducer(t, c, n, BootstrapServers(addr), MaxBlock(2*time.Second),
			RetryBackoff(100*time.Millisecond), RetryBackoffMax(time.Second),
			MetadataMaxAge(2*time.Minute), MetadataMaxIdle(5*time.Minute))
		before := c.MetadataRequests()
		res := p.ProduceSync(t.Context(), &Record{Topic: "gone", Value: []byte("v")})
		require.ErrorIs(t, res[0].Err, ErrTopicMetadata)
		require.ErrorIs(t, res[0].Err, kerr.UnknownTopicOrPartition)
		waiting := c.MetadataRequests() - before
		synctest.Wait()
		mu.Lock()
		failedAt = time.Now()
		mu.Unlock()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		mu.Lock()
		seen := append([]int(nil), dead...)
		mu.Unlock()
		t.Logf("%d Metadata requests while the record waited 2 s; after it failed, answers naming the topic at minutes %v (%d requests in all)",
			waiting, seen, c.MetadataRequests()-before-waiting)
		assert.Greater(t, waiting, int64(2), "asked again with backoff while a record waited")
		assert.LessOrEqual(t, len(seen), 3, "at most one per metadata.max.age.ms in the idle 5 minutes")
		for _, m := range seen {
			assert.Less(t, m, 5, "forgotten after metadata.max.idle.ms")
		}
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "live", Value: []byte("w")})[0].Err)
	})
}

// TestMetadataWithoutPartitionsKeepsWhatWasKnown: a Metadata answer naming
// a topic under a new topic id, without an error and with no partitions,
// cannot be true (Kafka topics have at least one). Taken as a re-creation
// with 0 partitions, it emptied the topic's partition table but left it
// known, and the next keyed or keyless record was placed modulo 0: a
// division by zero (or rand.Int32N(0)) panicking inside Produce with
// acc.mu held. It is ignored like any unusable partition list, and
// the producer goes on with what it knew.
func TestMetadataWithoutPartitionsKeepsWhatWasKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		var empty atomic.Bool
		addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
			md, ok := r.(*kmsg.MetadataResponse)
			if !ok || !empty.Load() {
				return
			}
			for i := range md.Topics {
				md.Topics[i].TopicID[0] ^= 0xff
				md.Topics[i].Partitions = nil
			}
		})
		// Not memProducer: its Close at cleanup would wait for ever for
		// the lock a panic in Produce left held (the negative control).
		p, err := New(BootstrapServers(addr), Dialer(n.Dial), Linger(time.Millisecond), RetryBackoff(5*time.Millisecond),
			RetryBackoffMax(50*time.Millisecond), MetadataMaxAge(100*time.Millisecond),
			optFunc(func(c *config) error { c.regress = regressFromEnv(); return nil }))
		require.NoError(t, err)
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("a")}).FirstErr())

		empty.Store(true)
		before := c.MetadataRequests()
		for c.MetadataRequests() < before+2 {
			time.Sleep(50 * time.Millisecond) // at least one answer without partitions applied
		}
		var (
			res       ProduceResults
			recovered any
		)
		func() {
			defer func() { recovered = recover() }()
			res = p.ProduceSync(context.Background(),
				&Record{Topic: "t", Key: []byte("k"), Value: []byte("b")},
				&Record{Topic: "t", Value: []byte("c")})
		}()
		require.Nil(t, recovered, "Produce panicked")
		require.NoError(t, res.FirstErr())
		require.Equal(t, keyPartition([]byte("k"), 2), res[0].Record.Partition())
		require.NoError(t, p.Close(context.Background()))
	})
}
