package producer_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/longhaul-kafka/longhaul/producer"
)

// windowLogger implements two hooks: it prints each window change and
// counts acknowledged records. Hooks run on the producer's sender goroutine
// and must return quickly; the counter is atomic because the example reads
// it from another goroutine.
type windowLogger struct {
	acked atomic.Int64
}

func (w *windowLogger) OnWindowChanged(topic string, partition int32, old, new int, why producer.WindowCause) {
	fmt.Printf("%s/%d window %d -> %d (%s)\n", topic, partition, old, new, why)
}

func (w *windowLogger) OnBatchAcked(b producer.BatchInfo, baseOffset int64) {
	w.acked.Add(int64(b.Records))
}

// Hooks observe the producer: here the window the broker announces
// (KIP-1269) and the records it acknowledged.
func ExampleHooks() {
	c := startBroker()
	defer c.Close()

	w := &windowLogger{}
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(w))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	r := &producer.Record{Topic: "events", Value: []byte("hello")}
	r.SetPartition(1)
	if err := p.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("acked records:", w.acked.Load())
	// Output:
	// events/1 window 5 -> 50 (learned)
	// acked records: 1
}
