package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behavior:
// * Lists every registered key with its version range. Produce is offered
//   up to v14 (KIP-1269), or up to v13 on an old-mode node, decided when
//   the request is handled: SetOld affects the next ApiVersions.
// * A Kafka 2.4 node (SetKafka24) offers InitProducerId up to v2, Produce
//   up to v8, FindCoordinator up to v3, AddPartitionsToTxn, AddOffsetsToTxn
//   and EndTxn up to v1, TxnOffsetCommit up to v2 and the group requests
//   at their 2.4 versions, and no features (transaction version 1 only).
// * A node with a Produce cap (Config.ProduceMaxVersions) offers Produce up
//   to it; below v3 (Kafka 0.10) from v0, and no InitProducerId; below v7
//   (Kafka 2.0) ListOffsets up to v3.
// * A version above 4 is answered with a v0 response carrying
//   UNSUPPORTED_VERSION and our ApiVersions range (KIP-511), as Kafka does.
//
// * v3+ lists the feature transaction.version (supported 0-2) and, when
//   above 0, its finalized level ([Cluster.SetTransactionVersion]) with
//   FinalizedFeaturesEpoch, which grows with every change.
//
// Simplifications: no other features (KIP-584), client software name and
// version are not validated.

func init() { regKey(18, 0, 4, handleApiVersions) }

// produceMaxVersion is the highest Produce version a non-old node offers.
const produceMaxVersion = 14

// oldProduceMaxVersion is the highest Produce version an old-mode node
// offers: no KIP-1269 field.
const oldProduceMaxVersion = 13

func handleApiVersions(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		spec := apis[k]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, spec.min, spec.max
		ak.MaxVersion = r.n.maxVersion(k, spec.max)
		if ak.MaxVersion < 0 {
			continue // a key this node's release does not have
		}
		if ak.MaxVersion < ak.MinVersion {
			ak.MinVersion = 0 // Kafka 0.10 offers Produce v0..v2
		}
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	if req.Version >= 3 && !r.n.kafka24 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = featTxnVersion, 0, 2
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		resp.FinalizedFeaturesEpoch = c.featuresEpoch
		if c.txnVersion > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = featTxnVersion, c.txnVersion, c.txnVersion
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	return resp, nil
}

// featTxnVersion is the feature name of the transaction version (KIP-890).
const featTxnVersion = "transaction.version"

// kafka24MaxVersions are Kafka 2.4's highest versions of the keys a
// producer and a consumer group use (SetKafka24): no KIP-360 epoch bump,
// no batched FindCoordinator, transaction version 1 only.
var kafka24MaxVersions = map[int16]int16{
	0: 8, 22: 2, // Produce, InitProducerId
	10: 3, 24: 1, 25: 1, 26: 1, 28: 2, // FindCoordinator, the transaction requests
	8: 8, 9: 6, 11: 6, 12: 4, 13: 4, 14: 4, // OffsetCommit, OffsetFetch, the group requests
}

// maxVersion is the highest version of key n serves, max being the
// registered one; -1 for a key n's release does not have. c.mu must be
// held.
func (n *node) maxVersion(key, max int16) int16 {
	if (key == keyGetTelemetrySubscriptions || key == keyPushTelemetry) && n.c.telemetry.cfg == nil {
		return -1 // no metrics reporter receives client metrics (SetTelemetry)
	}
	if v, ok := n.produceCap(); ok {
		switch {
		case key == 0:
			max = min(max, v)
		case key == 22 && v < 3:
			return -1 // InitProducerId came with Produce v3 (Kafka 0.11)
		case key == 2 && v < 7:
			max = min(max, 3) // CurrentLeaderEpoch (ListOffsets v4) came with Produce v7 (Kafka 2.1)
		}
	}
	switch {
	case n.kafka24:
		if v, ok := kafka24MaxVersions[key]; ok {
			return min(max, v)
		}
	case key == 0 && n.old:
		return min(max, oldProduceMaxVersion)
	}
	return max
}

// produceCap returns n's cap on Produce versions (Config.ProduceMaxVersions),
// ok false when it has none. c.mu must be held.
func (n *node) produceCap() (v int16, ok bool) {
	v, ok = n.c.cfg.ProduceMaxVersions[n.id]
	return v, ok
}

// apiVersionsUnsupported is the v0 answer to an ApiVersions request of a
// version we do not serve.
func apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	ak := kmsg.NewApiVersionsResponseApiKey()
	ak.ApiKey, ak.MinVersion, ak.MaxVersion = 18, apis[18].min, apis[18].max
	resp.ApiKeys = append(resp.ApiKeys, ak)
	return resp
}
