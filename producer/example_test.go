package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/producer"
)

// startBroker starts longhaul's embedded KIP-1269 broker, which stands in
// for a Kafka cluster in these examples. Its topic "events" retains 50
// batches per producer (producer.state.batches.to.retain=50).
func startBroker() *broker.Cluster {
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{
		{Name: "events", Partitions: 2, Window: 50},
	}})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// Produce is asynchronous: the callback reports each record's outcome,
// and Flush waits for all of them.
func Example() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	ctx := context.Background()
	done := make(chan string, 3)
	for i := range 3 {
		r := &producer.Record{Topic: "events", Value: fmt.Appendf(nil, "event %d", i)}
		r.SetPartition(0)
		p.Produce(ctx, r, func(r *producer.Record, err error) {
			if err != nil {
				done <- "failed: " + err.Error()
				return
			}
			done <- fmt.Sprintf("%s at partition %d, offset %d", r.Value, r.Partition, r.Offset)
		})
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		fmt.Println(<-done)
	}
	// Output:
	// event 0 at partition 0, offset 0
	// event 1 at partition 0, offset 1
	// event 2 at partition 0, offset 2
}

// ProduceSync waits for its records and returns the first error; on
// success each record's Partition and Offset are set.
func ExampleProducer_ProduceSync() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	a := &producer.Record{Topic: "events", Key: []byte("user-1"), Value: []byte("signed up")}
	b := &producer.Record{Topic: "events", Key: []byte("user-1"), Value: []byte("logged in")}
	if err := p.ProduceSync(context.Background(), a, b); err != nil {
		log.Fatal(err)
	}
	// The same key lands on the same partition, in order.
	fmt.Println(a.Partition == b.Partition, b.Offset-a.Offset)
	// Output: true 1
}

// The producer starts every partition at 5 batches in flight and learns
// the broker's window from its ProduceResponses; Stats and InFlightLimit
// show it.
func ExampleProducer_Stats() {
	c := startBroker()
	defer c.Close()

	p, err := producer.New(
		producer.BootstrapServers(c.Addr()),
		// The per-connection cap must not be below the window, or it is
		// the limit instead.
		producer.MaxInFlightRequestsPerConnection(100),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	fmt.Println("before:", p.InFlightLimit("events", 0))
	r := &producer.Record{Topic: "events", Value: []byte("hello")}
	r.SetPartition(0)
	if err := p.ProduceSync(context.Background(), r); err != nil {
		log.Fatal(err)
	}
	for _, ps := range p.Stats().Partitions {
		fmt.Printf("%s[%d]: limit %d, %d batches sent\n", ps.Topic, ps.Partition, ps.Limit, ps.BatchesSent)
	}
	// Output:
	// before: 5
	// events[0]: limit 50, 1 batches sent
	// events[1]: limit 5, 0 batches sent
}

// A Java producer configuration works as is: Kafka's property names and
// defaults, and Java-only properties such as key.serializer are ignored.
// Invalid values fail at construction, naming the property.
func ExampleNewFromProperties() {
	c := startBroker()
	defer c.Close()

	props := map[string]string{
		"bootstrap.servers":                     c.Addr(),
		"linger.ms":                             "10",
		"compression.type":                      "zstd",
		"max.in.flight.requests.per.connection": "50",
		"key.serializer":                        "org.apache.kafka.common.serialization.StringSerializer",
	}
	p, err := producer.NewFromProperties(props)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	r := &producer.Record{Topic: "events", Key: []byte("k"), Value: []byte("v")}
	fmt.Println(p.ProduceSync(context.Background(), r))

	props["acks"] = "1" // idempotence needs acks=all
	_, err = producer.NewFromProperties(props)
	var ce *producer.ConfigError
	if errors.As(err, &ce) {
		fmt.Printf("rejected %s=%s\n", ce.Property, ce.Value)
	}
	// Output:
	// <nil>
	// rejected acks=1
}
