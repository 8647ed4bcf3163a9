package kafkatest;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

/**
 * A metrics reporter for TestMetricsPushOnKafka that receives client
 * metrics (KIP-714): the broker hands it every accepted PushTelemetry,
 * and it parses the payload with Kafka's own OpenTelemetry protobuf
 * classes and appends, to the file named by the system property
 * kafkatest.telemetry.log, a "push" line per push (client instance id,
 * terminating, content type) and a "metric" line per data point (name,
 * attributes, value), or an "error" line if the payload does not parse.
 */
public final class RecordingTelemetry implements MetricsReporter, ClientTelemetryExporterProvider {
    private final String log = System.getProperty("kafkatest.telemetry.log");

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) -> record(payload);
    }

    private synchronized void record(ClientTelemetryPayload payload) {
        StringBuilder sb = new StringBuilder();
        sb.append("push ").append(payload.clientInstanceId())
            .append(" terminating=").append(payload.isTerminating())
            .append(" type=").append(payload.contentType()).append('\n');
        try {
            MetricsData data = MetricsData.parseFrom(payload.data().duplicate());
            for (ResourceMetrics rm : data.getResourceMetricsList()) {
                for (KeyValue kv : rm.getResource().getAttributesList()) {
                    sb.append("resource ").append(kv.getKey()).append('=').append(kv.getValue().getStringValue()).append('\n');
                }
                for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                    for (Metric m : sm.getMetricsList()) {
                        List<NumberDataPoint> points = m.hasSum() ? m.getSum().getDataPointsList() : m.getGauge().getDataPointsList();
                        for (NumberDataPoint p : points) {
                            sb.append("metric ").append(m.getName());
                            for (KeyValue kv : p.getAttributesList()) {
                                sb.append(' ').append(kv.getKey()).append('=').append(kv.getValue().getStringValue());
                            }
                            sb.append(' ').append(p.hasAsInt() ? Long.toString(p.getAsInt()) : Double.toString(p.getAsDouble()));
                            if (m.hasSum()) {
                                sb.append(m.getSum().getIsMonotonic() ? " monotonic" : "").append(' ').append(m.getSum().getAggregationTemporality());
                            }
                            sb.append('\n');
                        }
                    }
                }
            }
        } catch (Exception e) {
            sb.append("error ").append(e).append('\n');
        }
        try {
            Files.write(Paths.get(log), sb.toString().getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
