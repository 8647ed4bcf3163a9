package broker

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// startCluster starts a cluster closed at the end of the test.
func startCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// wireClient is a minimal test client over a raw connection, built on
// protocol's framing: it sends kmsg requests and reads responses in order.
type wireClient struct {
	t    testing.TB
	nc   net.Conn
	r    *bufio.Reader
	corr int32
	sent []kmsg.Request // requests awaiting a response, in order
	buf  []byte
}

func dialWire(t testing.TB, addr string) *wireClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &wireClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// send writes req (at its version) without waiting.
func (w *wireClient) send(req kmsg.Request) {
	w.t.Helper()
	w.corr++
	cid := "wire-test"
	if _, err := w.nc.Write(protocol.AppendRequest(nil, req, w.corr, &cid)); err != nil {
		w.t.Fatalf("write: %v", err)
	}
	w.sent = append(w.sent, req)
}

// recv reads the response to the oldest request sent, failing the test on
// error. Reads give up after 10 s so a bug cannot hang the suite.
func (w *wireClient) recv() kmsg.Response {
	w.t.Helper()
	resp, err := w.tryRecv()
	if err != nil {
		w.t.Fatalf("recv: %v", err)
	}
	return resp
}

func (w *wireClient) tryRecv() (kmsg.Response, error) {
	if len(w.sent) == 0 {
		return nil, errors.New("nothing sent")
	}
	req := w.sent[0]
	corr := w.corr - int32(len(w.sent)) + 1
	w.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := protocol.ReadFrame(w.r, w.buf, 0)
	if err != nil {
		return nil, err
	}
	w.sent = w.sent[1:]
	return protocol.ParseResponse(frame, req, corr)
}

// do sends req and returns its response.
func (w *wireClient) do(req kmsg.Request) kmsg.Response {
	w.t.Helper()
	w.send(req)
	return w.recv()
}

// batch builds a batch of n records valued "v<seq>".
func batch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	var bb protocol.BatchBuilder
	for i := range n {
		bb.Append(1700000000000+int64(i), nil, []byte{'v', byte('0' + (int(seq)+i)%10)}, nil)
	}
	b, err := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceReq builds a one-partition produce request at version.
func produceReq(c *Cluster, version int16, topic string, part int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.TopicID = c.topicID(topic)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = part
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// partResp returns the single partition response of a produce response.
func partResp(t testing.TB, resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response with %d topics, want 1 with 1 partition", len(pr.Topics))
	}
	return pr.Topics[0].Partitions[0]
}

// topicID returns a topic's id (zero if unknown), for building requests.
func (c *Cluster) topicID(name string) uuid {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[name]; t != nil {
		return t.id
	}
	return uuid{}
}

// produceOne sends one batch at version on w and returns the partition
// response.
func produceOne(t testing.TB, c *Cluster, w *wireClient, version int16, topic string, part int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return partResp(t, w.do(produceReq(c, version, topic, part, records)))
}

// bigBatch builds a non-idempotent batch of one record with value v.
func bigBatch(t testing.TB, v []byte) []byte {
	t.Helper()
	var bb protocol.BatchBuilder
	bb.Append(1700000000000, nil, v, nil)
	b, err := bb.Build(nil, protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
