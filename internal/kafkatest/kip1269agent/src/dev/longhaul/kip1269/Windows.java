package dev.longhaul.kip1269;

import java.io.File;
import java.lang.reflect.Field;
import java.util.Deque;
import java.util.List;
import java.util.ListIterator;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.storage.internals.log.UnifiedLog;

/**
 * What the patched Kafka methods call: the window N of each partition hosted by this broker, the
 * per-thread window of the producer-state call in progress, and the Produce v14 tag.
 *
 * <p>Loaded the first time patched code runs, never by the premain: its methods name Kafka types,
 * and the verifier may load them. Entry points take Object and cast to the declaring type of
 * what they call.
 */
public final class Windows {
  private Windows() {}

  /** KIP-1269's topic config. */
  static final String TOPIC_CONFIG = "producer.state.batches.to.retain";
  /** KIP-1269's broker default for it. */
  static final String BROKER_CONFIG = "log.producer.state.batches.to.retain";
  /** Kafka's window before KIP-1269, the default and the minimum. */
  static final int DEFAULT = 5;
  /** Tag of ProducerStateBatchesToRetain in PartitionProduceResponse. */
  static final int TAG = 1;

  /** The broker default, from KafkaConfig (log.producer.state.batches.to.retain). */
  private static volatile int brokerDefault = DEFAULT;
  /** Window of every partition with a log on this broker, by TopicPartition. */
  private static final ConcurrentHashMap<Object, Integer> WINDOWS = new ConcurrentHashMap<>();
  /** Topic names by topic id, for responses that carry only the id. */
  private static final ConcurrentHashMap<Object, String> NAMES = new ConcurrentHashMap<>();
  /** Window of the producer-state call running on this thread; 0 = none. */
  private static final ThreadLocal<int[]> CURRENT = ThreadLocal.withInitial(() -> new int[1]);

  /** Adds the topic config to LogConfig.CONFIG and the broker default to SERVER_CONFIG_DEF. */
  public static void defineConfigs(Class<?> logConfig) {
    try {
      Field topic = logConfig.getDeclaredField("CONFIG");
      topic.setAccessible(true);
      ((ConfigDef) topic.get(null))
          .define(
              TOPIC_CONFIG,
              ConfigDef.Type.INT,
              DEFAULT,
              ConfigDef.Range.atLeast(DEFAULT),
              ConfigDef.Importance.MEDIUM,
              "KIP-1269: how many batches per producer the partition retains for deduplication; "
                  + "announced to producers in Produce v14 responses (tag 1).");
      Field server = logConfig.getDeclaredField("SERVER_CONFIG_DEF");
      server.setAccessible(true);
      ((ConfigDef) server.get(null))
          .define(
              BROKER_CONFIG,
              ConfigDef.Type.INT,
              DEFAULT,
              ConfigDef.Range.atLeast(DEFAULT),
              ConfigDef.Importance.MEDIUM,
              "KIP-1269: the default of " + TOPIC_CONFIG + " for topics that do not set it.");
      Settings.log("defined " + TOPIC_CONFIG + " and " + BROKER_CONFIG);
    } catch (ReflectiveOperationException | RuntimeException e) {
      Settings.log("FAILED to define configs: " + e);
      throw new IllegalStateException(e);
    }
  }

  /** Puts the broker default into a KafkaConfig.extractLogConfigMap() result. */
  @SuppressWarnings("unchecked")
  public static void addBrokerDefault(Object kafkaConfig, Object map) {
    int n = DEFAULT;
    try {
      Integer v = ((AbstractConfig) kafkaConfig).getInt(BROKER_CONFIG);
      if (v != null) {
        n = v;
      }
    } catch (RuntimeException e) {
      Settings.log("broker default unreadable, using " + DEFAULT + ": " + e);
    }
    if (n != brokerDefault) {
      Settings.log("broker default " + BROKER_CONFIG + " = " + n);
    }
    brokerDefault = n;
    ((Map<String, Object>) map).put(TOPIC_CONFIG, n);
  }

  /** The window in a topic's LogConfig. */
  private static int windowOf(Object logConfig) {
    try {
      Integer v = ((AbstractConfig) logConfig).getInt(TOPIC_CONFIG);
      return v == null ? brokerDefault : Math.max(DEFAULT, v);
    } catch (RuntimeException e) {
      return brokerDefault;
    }
  }

  /** Registers the window of the log in dir, from UnifiedLog.create(dir, config, ...). */
  public static void registerDir(Object dir, Object logConfig) {
    TopicPartition tp;
    try {
      tp = UnifiedLog.parseTopicPartitionName((File) dir);
    } catch (RuntimeException e) {
      return;
    }
    put(tp, windowOf(logConfig));
  }

  /** Registers the window of a UnifiedLog (after construction and after updateConfig). */
  public static void registerLog(Object log) {
    UnifiedLog l = (UnifiedLog) log;
    TopicPartition tp = l.topicPartition();
    Optional<Uuid> id = l.topicId();
    if (id.isPresent()) {
      NAMES.put(id.get(), tp.topic());
    }
    put(tp, windowOf(l.config()));
  }

  private static void put(TopicPartition tp, int n) {
    Integer old = WINDOWS.put(tp, n);
    if ((old == null && n != DEFAULT) || (old != null && old != n)) {
      Settings.log("window " + tp + " = " + n + (old == null ? "" : " (was " + old + ")"));
    }
  }

  private static int windowFor(Object tp) {
    if (tp == null) {
      return brokerDefault;
    }
    Integer w = WINDOWS.get(tp);
    return w == null ? brokerDefault : w;
  }

  /** Sets this thread's window to tp's and returns the previous one for {@link #exit}. */
  public static int enter(Object tp) {
    int[] c = CURRENT.get();
    int prev = c[0];
    c[0] = windowFor(tp);
    return prev;
  }

  /** Restores the window {@link #enter} returned. */
  public static void exit(int previous) {
    CURRENT.get()[0] = previous;
  }

  /**
   * ProducerStateEntry.addBatchMetadata with the current window: evict the oldest batches until
   * fewer than N remain, then add. With N = 5 this is what Kafka does. Returns true: the original
   * method is skipped.
   */
  @SuppressWarnings("unchecked")
  public static boolean addBatch(Object deque, Object batch) {
    Deque<Object> d = (Deque<Object>) deque;
    int w = CURRENT.get()[0];
    int n = w == 0 ? DEFAULT : w;
    while (d.size() >= n) {
      d.removeFirst();
    }
    d.add(batch);
    return true;
  }

  /** Sets tag 1 = N on every partition of a ProduceResponseData about to be written as v14. */
  public static void tagResponse(Object data) {
    ProduceResponseData d = (ProduceResponseData) data;
    boolean always = Settings.alwaysTag;
    for (ProduceResponseData.TopicProduceResponse t : d.responses()) {
      String name = t.name();
      if (name == null || name.isEmpty()) {
        name = NAMES.get(t.topicId());
      }
      for (ProduceResponseData.PartitionProduceResponse p : t.partitionResponses()) {
        int n = name == null ? brokerDefault : windowFor(new TopicPartition(name, p.index()));
        List<RawTaggedField> tags = p.unknownTaggedFields();
        ListIterator<RawTaggedField> it = tags.listIterator();
        int at = -1;
        while (it.hasNext()) {
          RawTaggedField f = it.next();
          if (f.tag() == TAG) {
            it.remove();
          } else if (f.tag() > TAG && at < 0) {
            at = it.previousIndex();
          }
        }
        if (n != DEFAULT || always) {
          byte[] v = {(byte) (n >>> 24), (byte) (n >>> 16), (byte) (n >>> 8), (byte) n};
          tags.add(at < 0 ? tags.size() : at, new RawTaggedField(TAG, v));
        }
      }
    }
  }
}
