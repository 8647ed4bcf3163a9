package protocol

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnFuzzKeys are the answers FuzzTxnResponses decodes, picked by the
// first byte.
var txnFuzzKeys = []int16{keyFindCoordinator, keyInitProducerID, keyAddPartitionsToTxn, keyEndTxn, keyTxnOffsetCommit}

func txnFuzzSeeds() [][]byte {
	var seeds [][]byte
	add := func(i int, r kmsg.Response) {
		seeds = append(seeds, append([]byte{byte(i), byte(r.GetVersion())}, r.AppendTo(nil)...))
	}
	for v := int16(0); v <= 6; v++ {
		r := kmsg.NewPtrFindCoordinatorResponse()
		r.Version = v
		r.NodeID, r.Host, r.Port = 1, "h", 9092
		r.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: 1, Host: "h", Port: 9092}}
		add(0, r)
	}
	for v := int16(0); v <= 5; v++ {
		r := kmsg.NewPtrInitProducerIDResponse()
		r.Version, r.ProducerID, r.ProducerEpoch = v, 7, 1
		add(1, r)
		a := kmsg.NewPtrAddPartitionsToTxnResponse()
		a.Version = min(v, 3)
		a.Topics = []kmsg.AddPartitionsToTxnResponseTopic{{Topic: "a", Partitions: []kmsg.AddPartitionsToTxnResponseTopicPartition{{Partition: 0}, {Partition: 1, ErrorCode: 3}}}}
		add(2, a)
		e := kmsg.NewPtrEndTxnResponse()
		e.Version, e.ProducerID, e.ProducerEpoch = v, 7, 2
		add(3, e)
		o := kmsg.NewPtrTxnOffsetCommitResponse()
		o.Version = v
		o.Topics = []kmsg.TxnOffsetCommitResponseTopic{{Topic: "a", Partitions: []kmsg.TxnOffsetCommitResponseTopicPartition{{Partition: 0}}}}
		add(4, o)
	}
	return seeds
}

// FuzzTxnResponses feeds arbitrary bodies, at every version, to the
// decoders of the transactional answers: no panic; an error always wraps
// ErrMalformedResponse; an accepted answer is one the callers may act
// on (a coordinator with an address, an identity that is not negative,
// one code per asked partition).
func FuzzTxnResponses(f *testing.F) {
	for _, s := range txnFuzzSeeds() {
		f.Add(s)
	}
	asked := []TopicPartition{{"a", 0}, {"a", 1}}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := txnFuzzKeys[int(data[0])%len(txnFuzzKeys)]
		r := kmsg.ResponseForKey(key)
		r.SetVersion(int16(data[1]) % (r.MaxVersion() + 1))
		if r.ReadFrom(data[2:]) != nil {
			return
		}
		check := func(err error) {
			if err != nil && !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("error does not wrap ErrMalformedResponse: %v", err)
			}
		}
		switch resp := r.(type) {
		case *kmsg.FindCoordinatorResponse:
			res, err := findCoordinatorResult(resp, "tx")
			check(err)
			if err == nil && res.ErrorCode == 0 && (res.Addr == "" || res.NodeID < 0) {
				t.Fatalf("accepted a coordinator without an address: %+v", res)
			}
			if err == nil && res.ErrorCode != 0 && res.Addr != "" {
				t.Fatalf("an error with an address: %+v", res)
			}
		case *kmsg.InitProducerIDResponse:
			res, err := initTxnResult(resp, "b")
			check(err)
			if err == nil && res.ErrorCode == 0 && (res.ProducerID < 0 || res.Epoch < 0) {
				t.Fatalf("accepted no identity: %+v", res)
			}
			if (err != nil || res.ErrorCode != 0) && (res.ProducerID != -1 || res.Epoch != -1) {
				t.Fatalf("an identity with an error: %+v %v", res, err)
			}
		case *kmsg.AddPartitionsToTxnResponse:
			res, err := addPartitionsResult(resp, asked)
			check(err)
			if err == nil && (len(res) != len(asked) || res[0].TopicPartition != asked[0] || res[1].TopicPartition != asked[1]) {
				t.Fatalf("result does not follow the asked partitions: %+v", res)
			}
		case *kmsg.EndTxnResponse:
			res, err := endTxnResult(resp, "b")
			check(err)
			next := res.ProducerID >= 0 || res.Epoch >= 0
			if next && (err != nil || res.ErrorCode != 0 || resp.Version < 5 || res.ProducerID < 0 || res.Epoch < 0) {
				t.Fatalf("a next identity where none can be: %+v %v (v%d)", res, err, resp.Version)
			}
		case *kmsg.TxnOffsetCommitResponse:
			res, err := txnOffsetCommitResult(resp, asked)
			check(err)
			if err == nil && len(res) != len(asked) {
				t.Fatalf("result does not follow the asked partitions: %+v", res)
			}
		}
	})
}
