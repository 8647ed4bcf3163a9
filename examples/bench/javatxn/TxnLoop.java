// TxnLoop is the bench's transactional Java client (--txn, client java): the
// Go clients' loop with the Java producer. It begins a transaction, sends
// records as fast as the producer accepts them for the transaction's
// duration, commits, and does it again until it is killed; after every
// commit it prints one line:
//
//     commit <wall clock, ns since the epoch> <records> <producing ns> <commit ns>
//
// where producing is Begin to the end of sending and commit is
// commitTransaction's latency (the records still buffered draining, then
// EndTxn). Arguments: bootstrap topic recordSize durationMs transactionalId
// [property=value ...].

import java.time.Instant;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnLoop {
    public static void main(String[] args) {
        if (args.length < 5) {
            System.err.println("usage: TxnLoop bootstrap topic recordSize durationMs transactionalId [property=value ...]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", args[4]);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        String topic = args[1];
        byte[] value = new byte[Integer.parseInt(args[2])];
        long duration = Long.parseLong(args[3]) * 1_000_000L;
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            while (true) {
                long began = System.nanoTime();
                producer.beginTransaction();
                long records = 0;
                while (System.nanoTime() - began < duration) {
                    producer.send(new ProducerRecord<>(topic, value));
                    records++;
                }
                long produced = System.nanoTime();
                producer.commitTransaction();
                long committed = System.nanoTime();
                Instant now = Instant.now();
                System.out.println("commit " + (now.getEpochSecond() * 1_000_000_000L + now.getNano()) + " " + records
                    + " " + (produced - began) + " " + (committed - produced));
                System.out.flush();
            }
        }
    }
}
