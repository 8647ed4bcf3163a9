package kafkatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			d.enabled.Store(true)
			b := &producer.Record{Topic: topic, Value: []byte("B")}
			bErr := make(chan error, 1)
			p.Produce(ctx, b, func(_ *producer.Record, err error) { bErr <- err })
			time.Sleep(5 * time.Second) // past delivery.timeout.ms: B failed, fate unknown, and waits
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
