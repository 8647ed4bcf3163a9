package broker

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// fuzzSeeds returns valid request frames (bodies, without the size) for
// every served key at a few versions.
func fuzzSeeds(t testing.TB, c *Cluster) [][]byte {
	cid := "fuzz"
	var out [][]byte
	add := func(req kmsg.Request) {
		f := protocol.AppendRequest(nil, req, 1, &cid)
		out = append(out, f[4:])
	}
	for _, v := range []int16{3, 8, 9, 13, 14} {
		add(produceReq(c, v, "t", 0, batch(t, 1, 0, 0, 3)))
		add(produceReq(c, v, "t", 0, bigBatch(t, []byte("x"))))
	}
	for _, v := range []int16{0, 1, 4, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("t")
		req.Topics = append(req.Topics, rt)
		add(req)
	}
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		add(req)
	}
	for _, v := range []int16{4, 11, 12, 13, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 10, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "t", c.topicID("t")
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		add(req)
	}
	{
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		add(req)
	}
	{
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		add(req)
	}
	{
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions = "n", 2
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = propWindow, kmsg.StringPtr("9")
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		add(req)
	}
	{
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		req.Resources = append(req.Resources, rr)
		add(req)
	}
	{
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = propWindow, kmsg.StringPtr("7")
		rr.Configs = append(rr.Configs, cfg)
		req.Resources = append(req.Resources, rr)
		add(req)
	}
	out = append(out, txnFuzzSeeds(t, c)...)
	return out
}

// txnFuzzSeeds returns valid frames of the transaction and group
// coordinator requests.
func txnFuzzSeeds(t testing.TB, c *Cluster) [][]byte {
	cid := "fuzz"
	var out [][]byte
	add := func(req kmsg.Request) {
		f := protocol.AppendRequest(nil, req, 1, &cid)
		out = append(out, f[4:])
	}
	for _, v := range []int16{0, 1, 3, 4, 6} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = v, 1
		req.CoordinatorKey, req.CoordinatorKeys = "tx", []string{"tx", "g"}
		add(req)
	}
	for _, v := range []int16{1, 3, 4, 5} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = v, kmsg.StringPtr("tx"), 60000
		req.ProducerID, req.ProducerEpoch = 1000, 0
		add(req)
	}
	for _, v := range []int16{0, 3, 4, 5} {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID = v, "tx", 1000
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "tx", 1000, v == 5
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "t", []int32{0}
		tx.Topics = append(tx.Topics, tt)
		req.Transactions = append(req.Transactions, tx)
		add(req)
	}
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.Group = v, "tx", 1000, "g"
		add(req)
	}
	for _, v := range []int16{0, 3, 4, 5} {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.Commit = v, "tx", 1000, v%2 == 0
		add(req)
	}
	for _, v := range []int16{0, 3, 5} {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group, req.ProducerID = v, "tx", "g", 1000
		req.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Offset = 3
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		add(req)
	}
	for _, v := range []int16{1, 2, 7, 8, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = v, "g", v >= 7
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, rt)
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		req.Groups = append(req.Groups, g)
		add(req)
	}
	for _, v := range []int16{0, 4, 9} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.ProtocolType = v, "g", "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 6000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 1}
		req.Protocols = append(req.Protocols, p)
		add(req)
	}
	for _, v := range []int16{0, 5} {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.Generation, req.MemberID = v, "g", 1, "m"
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = "m", []byte{1}
		req.GroupAssignment = append(req.GroupAssignment, a)
		add(req)
	}
	for _, v := range []int16{0, 4} {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group, req.Generation, req.MemberID = v, "g", 1, "m"
		add(req)
	}
	for _, v := range []int16{0, 3, 5} {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = v, "g", "m"
		req.Members = append(req.Members, kmsg.LeaveGroupRequestMember{MemberID: "m", InstanceID: kmsg.StringPtr("i")})
		add(req)
	}
	for _, v := range []int16{0, 1, 7, 9} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = v, "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rt.Partitions = append(rt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		add(req)
	}
	var bb protocol.BatchBuilder
	bb.Append(1700000000000, nil, []byte("v"), nil)
	b, err := bb.Build(nil, protocol.BatchHeader{ProducerID: 1000, ProducerEpoch: 0, BaseSequence: 0, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int16{11, 12} {
		req := produceReq(c, v, "t", 0, b)
		req.TransactionID = kmsg.StringPtr("tx")
		add(req)
	}
	return out
}

// checkAndResetLogs verifies every partition's log (contiguous offsets,
// stored batches that parse and match the records) and then empties it, so
// a long fuzz run does not grow without bound. It also drops topics other
// than "t".
func checkAndResetLogs(t testing.TB, c *Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.groups)
	clear(c.txns)
	for name, tp := range c.topics {
		for _, p := range tp.parts {
			next, n := int64(0), 0
			for _, b := range p.batches {
				info, recs, err := protocol.ParseRecordBatch(b.raw, 0)
				if err != nil {
					t.Fatalf("%s[%d]: stored batch at %d does not parse: %v", name, p.index, b.base, err)
				}
				if b.base != next || info.BaseOffset != b.base || b.last != b.base+int64(info.LastOffsetDelta) {
					t.Fatalf("%s[%d]: batch at %d (stored %d..%d), want %d", name, p.index, info.BaseOffset, b.base, b.last, next)
				}
				n += len(recs)
				next = b.last + 1
			}
			recs := p.logRecords()
			for i, lr := range recs {
				if lr.Offset != int64(i) {
					t.Fatalf("%s[%d]: record %d has offset %d", name, p.index, i, lr.Offset)
				}
			}
			if next != p.next || n != len(recs) {
				t.Fatalf("%s[%d]: log end %d, records %d; batches say %d, %d", name, p.index, p.next, len(recs), next, n)
			}
			p.batches, p.next = nil, 0
			clear(p.pids)
			delete(c.ptxn, p)
		}
		if name != "t" {
			c.partitions -= len(tp.parts)
			delete(c.topics, name)
			delete(c.topicIDs, tp.id)
		}
	}
}

// FuzzHandleRequest feeds random request frames to a connection's handler:
// it must answer or ask to close, never panic, and leave the log intact.
func FuzzHandleRequest(f *testing.F) {
	setFetchWait(f, 0)
	c := startCluster(f, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	for _, s := range fuzzSeeds(f, c) {
		f.Add(s)
	}
	a, b := net.Pipe()
	f.Cleanup(func() { a.Close(); b.Close() })
	cc := newConn(c.nodes[0], a)
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, err := cc.handle(frame, time.Now())
		if err == nil {
			if p.resp != nil {
				_ = protocol.AppendResponse(nil, p.corr, p.resp)
			}
			c.release(p)
		}
		checkAndResetLogs(t, c)
	})
}

// FuzzConnStream writes a random byte stream to a real connection: the
// node must close it or answer, never panic or hang, and keep serving.
func FuzzConnStream(f *testing.F) {
	setFetchWait(f, 0)
	c := startCluster(f, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	for _, s := range fuzzSeeds(f, c) {
		frame := append([]byte{byte(len(s) >> 24), byte(len(s) >> 16), byte(len(s) >> 8), byte(len(s))}, s...)
		f.Add(append(frame, frame...))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		nc, err := net.Dial("tcp", c.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		go func() {
			nc.Write(stream)
			nc.(*net.TCPConn).CloseWrite()
		}()
		// Drain until the node closes: a node that neither answers nor
		// closes after our half-close would hang here, caught by the
		// deadline.
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		var buf [4096]byte
		for {
			if _, err := nc.Read(buf[:]); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("node neither answered nor closed")
				}
				break
			}
		}
		checkAndResetLogs(t, c)
	})
}

// setFetchWait sets maxFetchWait for the test: fuzzing must not wait.
func setFetchWait(tb testing.TB, d time.Duration) {
	old, oldGroup := maxFetchWait, maxGroupWait
	maxFetchWait, maxGroupWait = d, d
	tb.Cleanup(func() { maxFetchWait, maxGroupWait = old, oldGroup })
}
