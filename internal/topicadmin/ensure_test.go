package topicadmin

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
)

func TestEnsureCreatesMissingKeepsExisting(t *testing.T) {
	c := testkit.StartCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "old", Partitions: 2, Window: 7}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := Ensure(ctx, Config{Bootstrap: []string{c.Addr()}}, []Topic{
		{Name: "new", Partitions: 3, Configs: map[string]string{"producer.state.batches.to.retain": "50"}},
		{Name: "old", Partitions: 9, Configs: map[string]string{"producer.state.batches.to.retain": "50"}},
		{Name: "dflt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{{"new", true, 3}, {"old", false, 2}, {"dflt", true, 1}}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, res[i], want[i])
		}
	}
	if c.Window("new") != 50 || c.Window("old") != 7 {
		t.Errorf("windows: new %d (want 50), old %d (want 7, untouched)", c.Window("new"), c.Window("old"))
	}
}

func TestEnsureReportsRejectedConfig(t *testing.T) {
	c := testkit.StartCluster(t, broker.Config{})
	_, err := Ensure(context.Background(), Config{Bootstrap: []string{c.Addr()}}, []Topic{
		{Name: "bad", Configs: map[string]string{"producer.state.batches.to.retain": "3"}},
	})
	var te *TopicError
	if !errors.As(err, &te) || te.Topic != "bad" || !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("err = %v, want a TopicError for bad wrapping INVALID_CONFIG", err)
	}
}

func TestEnsureNoBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Ensure(ctx, Config{Bootstrap: []string{addr}}, []Topic{{Name: "t"}}); !errors.Is(err, ErrNoBroker) {
		t.Fatalf("err = %v, want ErrNoBroker", err)
	}
	if _, err := Ensure(ctx, Config{}, nil); !errors.Is(err, ErrNoBroker) {
		t.Fatalf("empty bootstrap: err = %v, want ErrNoBroker", err)
	}
}
