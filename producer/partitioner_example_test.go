package producer_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// A custom partitioner: keys "tenant/id" go by tenant, so one tenant's
// records stay together and in order; records without a key keep the
// default sticky partition. Returning a partition the topic does not have,
// or an error, fails only that record, with ErrInvalidRecord.
func ExampleRecordPartitioner() {
	c, err := producertest.Start(1, producertest.Topic{Name: "events", Partitions: 2, Window: 50})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	byTenant := producer.PartitionerFunc(func(r *producer.Record, n int32) (int32, error) {
		if r.Key == nil {
			return producer.StickyPartition, nil
		}
		tenant, _, _ := bytes.Cut(r.Key, []byte("/"))
		return producer.Murmur2Partitioner().Partition(&producer.Record{Key: tenant}, n)
	})
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.RecordPartitioner(byTenant))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	a := &producer.Record{Topic: "events", Key: []byte("acme/1"), Value: []byte("a")}
	b := &producer.Record{Topic: "events", Key: []byte("acme/2"), Value: []byte("b")}
	if err := p.ProduceSync(context.Background(), a, b).FirstErr(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("same partition:", a.Partition() == b.Partition())
	// Output: same partition: true
}

// Services moving from confluent-kafka-go (librdkafka) or sarama keep their
// keys on the same partitions by naming the partitioner they used:
// librdkafka's default is consistent_random, sarama's NewHashPartitioner is
// FNV1aPartitioner.
func ExampleFNV1aPartitioner() {
	fromLibrdkafka, err := producer.NewFromProperties(map[string]string{
		"bootstrap.servers": "localhost:9092",
		"partitioner":       "consistent_random",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fromLibrdkafka.Close(context.Background())

	fromSarama, err := producer.New(producer.BootstrapServers("localhost:9092"),
		producer.RecordPartitioner(producer.FNV1aPartitioner()))
	if err != nil {
		log.Fatal(err)
	}
	defer fromSarama.Close(context.Background())

	k := &producer.Record{Key: []byte("user-42")}
	part, _ := producer.FNV1aPartitioner().Partition(k, 12)
	fmt.Println("sarama hash partition of user-42 among 12:", part)
	// Output: sarama hash partition of user-42 among 12: 3
}
