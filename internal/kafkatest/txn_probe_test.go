package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// txnProbeVersions are the version ranges Kafka 4.4.0 advertises for the
// requests a transactional producer and its readers use, as the
// transactions facts file records them (producer/DESIGN.md,
// "Transactions", keeps the same table). The same at transaction
// versions 1 and 2: the feature changes what the versions mean, not
// which are offered.
var txnProbeVersions = []struct {
	key      int16
	min, max int16
}{
	{0, 0, 13}, // Produce (0-2 advertised but refused since 4.0)
	{1, 4, 18}, // Fetch: read_committed from v4
	{2, 1, 11}, // ListOffsets
	{10, 0, 6}, // FindCoordinator: batched from v4
	{22, 0, 5}, // InitProducerId: no v6 (KIP-939 two-phase commit)
	{24, 0, 5}, // AddPartitionsToTxn: clients use v0-3
	{25, 0, 4}, // AddOffsetsToTxn
	{26, 0, 5}, // EndTxn: v5 returns the next epoch
	{27, 1, 2}, // WriteTxnMarkers
	{28, 0, 6}, // TxnOffsetCommit: v6 names topics by id
	{61, 0, 0}, // DescribeProducers
	{65, 0, 0}, // DescribeTransactions
}

// TestTxnProbeVersions checks, on Kafka 4.4.0 formatted fresh at its
// default transaction.version (2) and formatted with
// transaction.version=1, the version ranges of txnProbeVersions, the
// finalized feature level, and the transaction protocol
// [protocol.TxnVersion] picks from them.
//
//	go test ./internal/kafkatest/ -run TestTxnProbeVersions -v
func TestTxnProbeVersions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features map[string]int
		level    int16
	}{
		{"TV2", nil, 2},
		{"TV1", map[string]int{protocol.FeatureTransactionVersion: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Start(t, Options{Features: tc.features})
			probeTxnVersions(t, c, tc.level)
		})
	}
}

func probeTxnVersions(t *testing.T, c *Cluster, level int16) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	av, err := APIVersions(ctx, c.DirectAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, want := range txnProbeVersions {
		minV, maxV, ok := VersionRange(av, want.key)
		name := kmsg.NameForKey(want.key)
		if !ok {
			t.Errorf("Kafka %s does not offer %s (%d)", Version, name, want.key)
			continue
		}
		got = append(got, fmt.Sprintf("%s(%d) v%d-v%d", name, want.key, minV, maxV))
		if minV != want.min || maxV != want.max {
			t.Errorf("%s (%d): Kafka %s offers v%d-v%d, the facts say v%d-v%d", name, want.key, Version, minV, maxV, want.min, want.max)
		}
	}
	var feats []string
	finalized := int16(-1)
	for _, f := range av.FinalizedFeatures {
		feats = append(feats, fmt.Sprintf("%s=%d", f.Name, f.MaxVersionLevel))
		if f.Name == protocol.FeatureTransactionVersion {
			finalized = f.MaxVersionLevel
		}
	}
	var supported []string
	for _, f := range av.SupportedFeatures {
		supported = append(supported, fmt.Sprintf("%s=%d-%d", f.Name, f.MinVersion, f.MaxVersion))
	}
	t.Logf("Kafka %s ApiVersions v%d: %s", Version, av.Version, strings.Join(got, ", "))
	t.Logf("finalized features (epoch %d): %s; supported: %s", av.FinalizedFeaturesEpoch, strings.Join(feats, " "), strings.Join(supported, " "))
	if finalized != level {
		t.Errorf("finalized transaction.version = %d, want %d", finalized, level)
	}

	conn, err := protocol.Dial(ctx, c.DirectAddr(0), protocol.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if lvl, ok := conn.FinalizedFeature(protocol.FeatureTransactionVersion); !ok || lvl != level {
		t.Errorf("Conn.FinalizedFeature = %d, %v; want %d", lvl, ok, level)
	}
	if tv := protocol.TxnVersion(conn); tv != int(level) {
		t.Errorf("protocol.TxnVersion = %d, want %d", tv, level)
	}
}
