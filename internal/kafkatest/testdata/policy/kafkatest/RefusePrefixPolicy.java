package kafkatest;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Map;

import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.CreateTopicPolicy;

/**
 * A create.topic.policy.class.name for TestMetadataVerdictsOnKafka: it
 * refuses every topic whose name starts with the system property
 * kafkatest.policy.prefix and appends "topic refused" or "topic allowed"
 * to the file named by kafkatest.policy.log, so the test sees that the
 * controller asked it.
 */
public final class RefusePrefixPolicy implements CreateTopicPolicy {
    private final String prefix = System.getProperty("kafkatest.policy.prefix", "refused-");
    private final String log = System.getProperty("kafkatest.policy.log");

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public void validate(RequestMetadata request) throws PolicyViolationException {
        String topic = request.topic();
        boolean refused = topic.startsWith(prefix);
        record(topic + (refused ? " refused\n" : " allowed\n"));
        if (refused) {
            throw new PolicyViolationException("kafkatest policy refuses topics starting with " + prefix + ": " + topic);
        }
    }

    private synchronized void record(String line) {
        if (log == null) {
            return;
        }
        try {
            Files.write(Paths.get(log), line.getBytes(StandardCharsets.UTF_8),
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new PolicyViolationException("kafkatest policy cannot write " + log + ": " + e);
        }
    }

    @Override
    public void close() {}
}
