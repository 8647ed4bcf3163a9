package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// createACLs grants principal the operations on topic (ALLOW, any
// host), through node 0's DIRECT listener, whose ANONYMOUS principal is a
// super user.
func createACLs(t *testing.T, c *Cluster, principal, topic string, ops ...kmsg.ACLOperation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := protocol.Dial(ctx, c.DirectAddr(0), protocol.DialConfig{ClientID: "acl-admin"})
	require.NoError(t, err)
	defer conn.Close()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range ops {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType = kmsg.ACLResourceTypeTopic
		cr.ResourceName = topic
		cr.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		cr.Principal = principal
		cr.Host = "*"
		cr.Operation = op
		cr.PermissionType = kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
	}
	r, err := conn.Do(ctx, req)
	require.NoError(t, err)
	for _, res := range r.(*kmsg.CreateACLsResponse).Results {
		require.Zero(t, res.ErrorCode, "CreateACLs: %v", res.ErrorMessage)
	}
	// CreateACLs answers once the controller committed the bindings; the
	// broker's authorizer applies them from the metadata log a moment
	// later (before, a producer's InitProducerId could be refused with
	// CLUSTER_AUTHORIZATION_FAILED). DescribeACLs is answered by that
	// authorizer: wait until it shows them all.
	for {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.ResourceType = kmsg.ACLResourceTypeTopic
		d.ResourceName = kmsg.StringPtr(topic)
		d.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		d.Principal = kmsg.StringPtr(principal)
		d.Operation = kmsg.ACLOperationAny
		d.PermissionType = kmsg.ACLPermissionTypeAllow
		r, err := conn.Do(ctx, d)
		require.NoError(t, err)
		dr := r.(*kmsg.DescribeACLsResponse)
		require.Zero(t, dr.ErrorCode, "DescribeACLs")
		seen := 0
		for _, res := range dr.Resources {
			seen += len(res.ACLs)
		}
		if seen >= len(ops) {
			return
		}
		require.NoError(t, ctx.Err(), "the ACLs never reached the broker's authorizer")
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadbackOnKafka: Kafka 4.4 with the StandardAuthorizer and a
// SASL/PLAIN listener. Every produce response of a batch B is lost (the
// connection closed before it arrives) until delivery.timeout.ms fails B
// with its fate unknown; B is in the log. Then a record C is produced,
// whose batch, under the bumped epoch, is the fence. A principal with
// READ (and DESCRIBE_CONFIGS) on the topic gets B settled: its callback
// succeeds, at the offset where a consumer finds it, once. A principal
// with WRITE only gets FateUnknown with ErrReadbackNotAuthorized.
func TestReadbackOnKafka(t *testing.T) {
	users := map[string]string{"reader": "reader-secret", "writer": "writer-secret"}
	c := Start(t, Options{
		BrokerConfig: map[string]string{
			"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			// The PLAINTEXT listeners (inter-broker, controller, the
			// harness's admin requests) are ANONYMOUS.
			"super.users": "User:ANONYMOUS",
		},
		Listeners: []Listener{{Name: "SASL_PLAINTEXT", Protocol: "SASL_PLAINTEXT", Config: SASLListenerConfig(users)}},
	})
	for _, tc := range []struct {
		user string
		ops  []kmsg.ACLOperation
	}{
		{"reader", []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationDescribeConfigs}},
		{"writer", []kmsg.ACLOperation{kmsg.ACLOperationWrite}},
	} {
		t.Run(tc.user, func(t *testing.T) {
			topic := "readback-" + tc.user
			c.CreateTopic(t, topic, 1, 1, nil)
			createACLs(t, c, "User:"+tc.user, topic, tc.ops...)
			d := newRespDropper(1, 1)
			rb := &readbackLog{}
			p, err := producer.New(
				producer.BootstrapServers(c.ListenerBootstrap("SASL_PLAINTEXT")),
				producer.SASL(plain.Auth{User: tc.user, Pass: users[tc.user]}.AsMechanism()),
				producer.Dialer(d.dial),
				producer.ReadBack(true),
				producer.Linger(0),
				producer.RequestTimeout(time.Second),
				producer.DeliveryTimeout(4*time.Second),
				producer.RetryBackoff(20*time.Millisecond),
				producer.RetryBackoffMax(200*time.Millisecond),
				producer.Hooks(rb),
			)
			require.NoError(t, err)
			defer p.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 5 {
				require.NoError(t, p.ProduceSync(ctx, &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "warm-%d", i)}).FirstErr())
			}
			bumps := p.Stats().EpochBumps
			d.enabled.Store(true)
			b := &producer.Record{Topic: topic, Value: []byte("B")}
			bErr := make(chan error, 1)
			p.Produce(ctx, b, func(_ *producer.Record, err error) { bErr <- err })
			// B failed (past delivery.timeout.ms, fate unknown, and
			// waits) once the producer bumped its epoch, which it does
			// in the sender pass after the failure: nothing of B is left
			// in flight to be answered once the dropping stops, and B's
			// read-back budget, which runs from the failure, is intact.
			for p.Stats().EpochBumps == bumps {
				require.NoError(t, ctx.Err(), "B never failed")
				time.Sleep(20 * time.Millisecond)
			}
			d.enabled.Store(false)
			require.Positive(t, d.dropped.Load(), "responses dropped")
			select {
			case err := <-bErr:
				t.Fatalf("B called back before its fence: %v", err)
			default:
			}
			require.NoError(t, p.ProduceSync(ctx, &producer.Record{Topic: topic, Value: []byte("C")}).FirstErr())
			var err2 error
			select {
			case err2 = <-bErr:
			case <-ctx.Done():
				t.Fatal("B never called back")
			}
			st := p.Stats().Readback
			infos := rb.all()
			t.Logf("%s: B: %v; Stats.Readback %+v; hook %+v", tc.user, err2, st, infos)
			recs := c.Consume(t, topic, 7, 30*time.Second)[0]
			require.Len(t, recs, 7, "warm-up, B once, C")
			if tc.user == "writer" {
				require.True(t, producer.IsFateUnknown(err2), "%v", err2)
				require.ErrorIs(t, err2, producer.ErrReadbackNotAuthorized)
				require.Equal(t, int64(1), st.NotAuthorized)
				return
			}
			require.NoError(t, err2, "B settled as written")
			require.Equal(t, int64(5), b.Offset)
			require.Equal(t, "B", string(recs[5].Value))
			require.Equal(t, int64(5), recs[5].Offset)
			require.Equal(t, int64(1), st.Written)
			require.Len(t, infos, 1)
			require.Equal(t, producer.ReadbackWritten, infos[0].Outcome)
			require.Equal(t, []int64{5}, infos[0].Offsets)
			require.Equal(t, int64(5), infos[0].From)
			require.Equal(t, int64(6), infos[0].Fence)
		})
	}
}

// readbackLog keeps what HookReadback reported.
type readbackLog struct {
	mu    sync.Mutex
	infos []producer.ReadbackInfo
}

func (l *readbackLog) OnReadback(i producer.ReadbackInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.infos = append(l.infos, i)
}

func (l *readbackLog) all() []producer.ReadbackInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]producer.ReadbackInfo(nil), l.infos...)
}

// TestReadbackLinkFaultsOnKafka: Kafka 4.4, a producer through the
// harness's proxy, a batch B of one record whose every attempt meets a
// link fault until delivery.timeout.ms fails it with its fate unknown,
// then a record C, whose batch under the bumped epoch is the fence.
//
//   - request: the proxy swallows every Produce request of B and cuts the
//     connection ([linkproxy.Proxy.DropRequests]): B never reaches the
//     broker, and read-back settles it ErrNotWritten (not FateUnknown).
//
//   - response: the proxy forwards each request and swallows its answer
//     ([linkproxy.Proxy.DropResponses]): B is in the log, and read-back
//     settles it written at its offset.
//
//   - log-start: a producer whose first batch is B, on a topic where
//     another producer wrote 5 records and DeleteRecords then moved the
//     log start to 3. There is no acknowledgement before B's first send;
//     K is the high watermark (5) a ListOffsets written ahead of B's first
//     Produce request answered. With the response fault (log-start-response)
//     that answer arrives, and B is settled written at 5 from K 5. The
//     request fault (log-start) cuts the connection as it reads B's
//     request, so the answer ahead of it may be lost with it: then K is 0,
//     [0, 3) is unreadable and B stays unknown with ErrReadbackLogStart,
//     whose message says K is 0; else B is settled not written from K 5.
//
// Each outcome is checked against the log, read with an independent kgo
// consumer (checkSettled). The negative control runs the request and
// response faults with read-back off: the same check then reports the
// fate unknown, so it tells a settled outcome from an unsettled one.
func TestReadbackLinkFaultsOnKafka(t *testing.T) {
	c := Start(t, Options{})
	// Also B's read-back budget (capped by it), which after the bump must
	// hold C's acknowledgement and the read (a dial, Fetch,
	// DescribeConfigs): up to 1.6 s on a loaded 2-core machine.
	const deliveryTimeout = 5 * time.Second
	for _, tc := range []struct {
		fault    string
		readback bool
	}{
		{"request", true}, {"response", true}, {"log-start", true}, {"log-start-response", true}, {"request", false}, {"response", false},
	} {
		name := fmt.Sprintf("%s/readback=%v", tc.fault, tc.readback)
		t.Run(name, func(t *testing.T) {
			topic := fmt.Sprintf("readback-link-%s-%v", tc.fault, tc.readback)
			c.CreateTopic(t, topic, 1, 1, nil)
			firstBatch := strings.HasPrefix(tc.fault, "log-start")
			if firstBatch {
				w, err := producer.New(producer.BootstrapServers(c.Bootstrap()), producer.Linger(0))
				require.NoError(t, err)
				for i := range 5 {
					require.NoError(t, w.ProduceSync(context.Background(), &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "other-%d", i)}).FirstErr())
				}
				require.NoError(t, w.Close(context.Background()))
				deleteRecords(t, c, topic, 3)
			}
			rb := &readbackLog{}
			p, err := producer.New(
				producer.BootstrapServers(c.ProxiedBootstrap()),
				producer.ReadBack(tc.readback),
				producer.Linger(0),
				producer.RequestTimeout(time.Second),
				producer.DeliveryTimeout(deliveryTimeout),
				producer.RetryBackoff(20*time.Millisecond),
				producer.RetryBackoffMax(200*time.Millisecond),
				producer.Hooks(rb),
			)
			require.NoError(t, err)
			defer p.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 5 {
				if firstBatch {
					break // B is the producer's first batch
				}
				require.NoError(t, p.ProduceSync(ctx, &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "warm-%d", i)}).FirstErr())
			}
			bumps := p.Stats().EpochBumps
			px := c.Proxy(0)
			before := px.Stats()
			drop := px.DropRequests
			if strings.HasSuffix(tc.fault, "response") {
				drop = px.DropResponses
			}
			drop(produceKey, math.MaxInt)
			defer drop(produceKey, 0)

			b := &producer.Record{Topic: topic, Value: []byte("B")}
			bErr := make(chan error, 1)
			p.Produce(ctx, b, func(_ *producer.Record, err error) { bErr <- err })
			// B failed once the producer bumped its epoch, which it does
			// with nothing in flight (no attempt of B is left to meet the
			// fault's end) in the sender pass after B's failure: the wait
			// takes nothing of B's read-back budget, which runs from the
			// failure (it once did, a missed wake-up: the bump came only
			// at B's read-back deadline).
			for p.Stats().EpochBumps == bumps {
				require.NoError(t, ctx.Err(), "B never failed")
				time.Sleep(20 * time.Millisecond)
			}
			drop(produceKey, 0)
			after := px.Stats()
			dropped := after.DroppedRequests - before.DroppedRequests
			if strings.HasSuffix(tc.fault, "response") {
				dropped = after.DroppedResponses - before.DroppedResponses
			}
			require.Positive(t, dropped, "attempts of B the proxy dropped")
			if tc.readback {
				select {
				case err := <-bErr:
					t.Fatalf("B called back before its fence: %v", err)
				default:
				}
			}
			cRec := &producer.Record{Topic: topic, Value: []byte("C")}
			require.NoError(t, p.ProduceSync(ctx, cRec).FirstErr())
			var errB error
			select {
			case errB = <-bErr:
			case <-ctx.Done():
				t.Fatal("B never called back")
			}
			logB := offsetsOf(t, c, topic, "B")
			outcome, verr := checkSettled(errB, b, logB)
			t.Logf("%s: %d attempts dropped; B: %v; log has B at %v; C at %d; hook %+v", name, dropped, errB, logB, cRec.Offset, rb.all())

			// The fault did what it says, whatever the producer tells.
			if strings.HasSuffix(tc.fault, "response") {
				require.Equal(t, []int64{5}, logB, "a request whose answer was lost is in the log once")
			} else {
				require.Empty(t, logB, "a swallowed request reached the log")
			}
			if !tc.readback {
				require.ErrorIs(t, verr, errFateUnknown, "with read-back off the check must see the fate unknown")
				return
			}
			st := p.Stats().Readback
			infos := rb.all()
			require.Len(t, infos, 1)
			require.Equal(t, cRec.Offset, infos[0].Fence)
			if tc.fault == "log-start" && infos[0].Outcome == producer.ReadbackUnknown {
				// The ListOffsets answer was lost with the connection.
				require.ErrorIs(t, verr, errFateUnknown)
				require.ErrorIs(t, errB, producer.ErrReadbackLogStart)
				require.ErrorContains(t, errB, "K 0")
				require.Equal(t, int64(1), st.LogStart)
				require.Equal(t, int64(0), infos[0].From, "K: no acknowledgement and no ListOffsets answer before B")
				require.Equal(t, int64(5), cRec.Offset)
				return
			}
			require.NoError(t, verr)
			require.Equal(t, int64(5), infos[0].From, "K: the end of the last acknowledgement before B, or the high watermark before B's first send")
			if !strings.HasSuffix(tc.fault, "response") {
				require.Equal(t, "not written", outcome)
				require.Equal(t, int64(1), st.NotWritten)
				require.Equal(t, producer.ReadbackNotWritten, infos[0].Outcome)
				require.Equal(t, int64(5), cRec.Offset)
			} else {
				require.Equal(t, "written", outcome)
				require.Equal(t, int64(1), st.Written)
				require.Equal(t, producer.ReadbackWritten, infos[0].Outcome)
				require.Equal(t, []int64{5}, infos[0].Offsets)
				require.Equal(t, int64(6), cRec.Offset)
			}
		})
	}
}

// errFateUnknown is checkSettled's verdict on a callback that left the
// record's fate unknown.
var errFateUnknown = errors.New("fate unknown")

// checkSettled judges a record's callback error err against logOffsets,
// the offsets where the log holds the record: "written" when it
// succeeded at the one offset the log holds it at, "not written" when it
// got ErrNotWritten and the log holds no copy. Any other answer is an
// error: errFateUnknown when the callback left the fate unknown, another
// when the callback contradicts the log.
func checkSettled(err error, r *producer.Record, logOffsets []int64) (string, error) {
	switch {
	case producer.IsFateUnknown(err):
		return "", fmt.Errorf("%w: %v", errFateUnknown, err)
	case err == nil:
		if len(logOffsets) != 1 || logOffsets[0] != r.Offset {
			return "", fmt.Errorf("called back written at %d, the log holds it at %v", r.Offset, logOffsets)
		}
		return "written", nil
	case errors.Is(err, producer.ErrNotWritten):
		if len(logOffsets) != 0 {
			return "", fmt.Errorf("called back not written, the log holds it at %v", logOffsets)
		}
		return "not written", nil
	default:
		return "", fmt.Errorf("called back with %v", err)
	}
}

// offsetsOf reads all of partition 0 of topic (from its log start to its
// log end offset) with an independent consumer and returns the offsets of
// the records whose value is value.
func offsetsOf(t *testing.T, c *Cluster, topic, value string) []int64 {
	t.Helper()
	end := c.EndOffsets(t, topic, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := latestOffsetsRequest(topic, 0)
	req.Topics[0].Partitions[0].Timestamp = -2 // earliest: the log start
	resp, err := requestNode(ctx, c.DirectAddr(0), req)
	require.NoError(t, err)
	pr := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	require.Zero(t, pr.ErrorCode)
	var at []int64
	for _, r := range c.Consume(t, topic, int(end-pr.Offset), 30*time.Second)[0] {
		if string(r.Value) == value {
			at = append(at, r.Offset)
		}
	}
	return at
}

// deleteRecords moves the log start of partition 0 of topic to offset
// (DeleteRecords, on node 0's DIRECT listener: tests of one node).
func deleteRecords(t *testing.T, c *Cluster, topic string, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := requestNode(ctx, c.DirectAddr(0), req)
	require.NoError(t, err)
	for _, tr := range resp.(*kmsg.DeleteRecordsResponse).Topics {
		for _, pr := range tr.Partitions {
			require.Zero(t, pr.ErrorCode, "DeleteRecords: %v", kerr.ErrorForCode(pr.ErrorCode))
			require.Equal(t, offset, pr.LowWatermark)
		}
	}
}
