package kafkatest

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/linkproxy"
)

// TestAdvertisedExternalProxyAndRestart covers Options.Advertise with a
// proxy the test owns, and KillNode/RestartNode keeping data and ports.
func TestAdvertisedExternalProxyAndRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := Start(t, Options{Advertise: func(int) string { return ln.Addr().String() }})
	p := linkproxy.Serve(ln, c.ProxiedListener(0))
	t.Cleanup(func() { p.Close() })
	if c.Proxy(0) != nil || c.ProxiedAddr(0) != p.Addr() {
		t.Fatalf("Proxy(0) = %v, ProxiedAddr %s, want nil and %s", c.Proxy(0), c.ProxiedAddr(0), p.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Metadata fetched through the proxy advertises the proxy.
	conn, err := Dial(ctx, p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp, err := conn.Request(ctx, req)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	bs := resp.(*kmsg.MetadataResponse).Brokers
	if len(bs) != 1 || net.JoinHostPort(bs[0].Host, strconv.Itoa(int(bs[0].Port))) != p.Addr() {
		t.Fatalf("brokers via proxy: %+v, want %s", bs, p.Addr())
	}

	const topic = "survives-restart"
	c.CreateTopic(t, topic, 1, 1, nil)
	cl := c.Client(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.KillNode(0)
	if _, err := APIVersions(ctx, c.DirectAddr(0)); err == nil {
		t.Fatal("broker still answers after KillNode")
	}
	c.RestartNode(t, 0)
	got := c.Consume(t, topic, 1, time.Minute)
	if len(got[0]) != 1 || string(got[0][0].Value) != "before" {
		t.Fatalf("after restart the log holds %v", got)
	}
	if st := p.Stats(); st.Accepted == 0 {
		t.Fatal("external proxy saw no connection")
	}
}
