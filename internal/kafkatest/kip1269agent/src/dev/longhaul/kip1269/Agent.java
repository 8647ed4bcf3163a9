package dev.longhaul.kip1269;

import static net.bytebuddy.matcher.ElementMatchers.isAbstract;
import static net.bytebuddy.matcher.ElementMatchers.isConstructor;
import static net.bytebuddy.matcher.ElementMatchers.isMethod;
import static net.bytebuddy.matcher.ElementMatchers.isStatic;
import static net.bytebuddy.matcher.ElementMatchers.isTypeInitializer;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.not;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import java.lang.instrument.Instrumentation;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.asm.AsmVisitorWrapper;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.utility.JavaModule;

/**
 * Java agent that turns an unmodified Apache Kafka 4.4 broker into a KIP-1269 broker: a per-topic
 * window of retained producer batches ({@code producer.state.batches.to.retain}), Produce v14, and
 * the window announced in tag 1 of every v14 PartitionProduceResponse.
 *
 * <p>A test and evaluation tool of the longhaul project, not a Kafka fork: it rewrites a few
 * methods of Kafka's own classes when they load, and Kafka's deduplication code does the rest.
 *
 * <p>Agent arguments (comma-separated): {@code tag=always} writes tag 1 even when the window is 5
 * (generated Kafka code omits a tagged field equal to its default, and so does this agent by
 * default).
 *
 * <p>Every class it means to patch is listed at start-up ("kip1269-agent: will patch N classes:")
 * and logged on stdout when patched ("kip1269-agent: patched CLASS"); a class whose expected
 * methods are missing (a Kafka upgrade renamed them) is logged as "kip1269-agent: FAILED CLASS"
 * and left alone, so a harness can tell a patched broker from a stock one.
 *
 * <p>Advice signatures use Object only: naming Kafka types would load Kafka classes inside the
 * transformer, where they silently stay unpatched. Everything that touches Kafka types is in
 * {@link Windows}, which is first loaded when patched code runs.
 */
public final class Agent {
  private Agent() {}

  /** One class to patch: advice per method matcher. */
  private static final class Patch {
    final String type;
    final Map<String, ElementMatcher<? super MethodDescription>> methods = new LinkedHashMap<>();
    final Map<String, Class<?>> advice = new LinkedHashMap<>();

    Patch(String type) {
      this.type = type;
    }

    Patch on(String what, ElementMatcher<? super MethodDescription> m, Class<?> adv) {
      methods.put(what, m);
      advice.put(what, adv);
      return this;
    }
  }

  public static void premain(String args, Instrumentation inst) {
    Settings.configure(args);
    // Refused before anything is installed: on another Kafka the patched methods may mean
    // something else, and a broker that half-applies a window is worse than one that does not
    // start. Exiting here (status 1) stops the JVM before Kafka's main runs; an exception would
    // abort it with a native crash report instead.
    String version = Settings.kafkaVersion(ClassLoader.getSystemClassLoader());
    String refusal = Settings.refusal(version);
    if (refusal != null) {
      log("FAILED " + refusal);
      System.exit(1);
    }
    log("Kafka " + version);
    List<Patch> patches = patches();
    StringBuilder names = new StringBuilder();
    for (Patch p : patches) {
      names.append(names.length() == 0 ? "" : " ").append(p.type);
    }
    log("will patch " + patches.size() + " classes: " + names);
    AgentBuilder b =
        new AgentBuilder.Default()
            .with(AgentBuilder.DescriptionStrategy.Default.POOL_ONLY)
            .with(AgentBuilder.TypeStrategy.Default.DECORATE)
            .with(AgentBuilder.InitializationStrategy.NoOp.INSTANCE)
            .with(new Listener());
    for (Patch p : patches) {
      b = b.type(named(p.type)).transform(new Transformer(p));
    }
    b.installOn(inst);
    // Load (without initializing) every class to patch now, so that the log says before Kafka
    // starts whether each one was patched, instead of when a Produce request first arrives.
    ClassLoader app = ClassLoader.getSystemClassLoader();
    for (Patch p : patches) {
      try {
        Class.forName(p.type, false, app);
      } catch (ClassNotFoundException | LinkageError e) {
        log("FAILED " + p.type + ": " + e);
      }
    }
  }

  static void log(String msg) {
    Settings.log(msg);
  }

  private static List<Patch> patches() {
    final String log = "org.apache.kafka.storage.internals.log.";
    final String msg = "org.apache.kafka.common.message.";
    List<Patch> ps = new ArrayList<>();
    ps.add(new Patch(log + "LogConfig").on("<clinit>", isTypeInitializer(), DefineConfigs.class));
    ps.add(
        new Patch("kafka.server.KafkaConfig")
            .on("extractLogConfigMap()", named("extractLogConfigMap").and(takesArguments(0)), BrokerDefault.class));
    ps.add(
        new Patch(msg + "ApiMessageType")
            .on("highestSupportedVersion(boolean)", named("highestSupportedVersion").and(takesArguments(1)), AdvertiseV14.class));
    ps.add(
        new Patch(msg + "ProduceRequestData")
            .on("read", named("read").and(takesArguments(2)), ReadAsV13.class)
            .on("write", named("write").and(takesArguments(3)), WriteAsV13.class)
            .on("addSize", named("addSize").and(takesArguments(3)), WriteAsV13.class));
    ps.add(
        new Patch(msg + "ProduceResponseData")
            .on("read", named("read").and(takesArguments(2)), ReadAsV13.class)
            .on("write", named("write").and(takesArguments(3)), ResponseV14.class)
            .on("addSize", named("addSize").and(takesArguments(3)), ResponseV14.class));
    ps.add(
        new Patch(log + "UnifiedLog")
            .on("create", named("create").and(isStatic()), RegisterFromCreate.class)
            .on("<init>", isConstructor(), RegisterLog.class)
            .on("updateConfig", named("updateConfig").and(takesArguments(1)), RegisterLog.class));
    ElementMatcher.Junction<MethodDescription> instanceMethods =
        isMethod().and(not(isStatic())).and(not(isAbstract()));
    ps.add(new Patch(log + "ProducerStateManager").on("instance methods", instanceMethods, ScopeWindow.class));
    ps.add(new Patch(log + "ProducerAppendInfo").on("instance methods", instanceMethods, ScopeWindow.class));
    ps.add(
        new Patch(log + "ProducerStateEntry")
            .on("addBatchMetadata", named("addBatchMetadata").and(takesArguments(1)), RetainWindow.class));
    return ps;
  }

  /** Applies a patch's advice, or none of it when a method is missing. */
  private static final class Transformer implements AgentBuilder.Transformer {
    private final Patch p;

    Transformer(Patch p) {
      this.p = p;
    }

    @Override
    public DynamicType.Builder<?> transform(
        DynamicType.Builder<?> builder,
        TypeDescription type,
        ClassLoader loader,
        JavaModule module,
        java.security.ProtectionDomain pd) {
      List<String> missing = new ArrayList<>();
      for (Map.Entry<String, ElementMatcher<? super MethodDescription>> e : p.methods.entrySet()) {
        boolean found =
            e.getKey().equals("<clinit>")
                || !type.getDeclaredMethods().filter(e.getValue()).isEmpty();
        if (!found) {
          missing.add(e.getKey());
        }
      }
      if (!missing.isEmpty()) {
        log("FAILED " + type.getName() + ": no method " + missing + " (Kafka changed?)");
        return builder;
      }
      for (Map.Entry<String, ElementMatcher<? super MethodDescription>> e : p.methods.entrySet()) {
        AsmVisitorWrapper w = Advice.to(p.advice.get(e.getKey())).on(e.getValue());
        builder = builder.visit(w);
      }
      return builder;
    }
  }

  private static final class Listener extends AgentBuilder.Listener.Adapter {
    @Override
    public void onTransformation(
        TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded, DynamicType dynamicType) {
      log("patched " + type.getName());
    }

    @Override
    public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded, Throwable t) {
      log("FAILED " + typeName + ": " + t);
      t.printStackTrace(System.out);
    }
  }

  // ---- advice (inlined into Kafka's methods; Object-typed on purpose) ----

  /** LogConfig's static initializer: define the topic config and the broker default. */
  static final class DefineConfigs {
    @Advice.OnMethodExit
    static void exit(@Advice.Origin Class<?> logConfig) {
      Windows.defineConfigs(logConfig);
    }
  }

  /** KafkaConfig.extractLogConfigMap: carry the broker default into every topic's config. */
  static final class BrokerDefault {
    @Advice.OnMethodExit
    static void exit(@Advice.This Object kafkaConfig, @Advice.Return Object map) {
      Windows.addBrokerDefault(kafkaConfig, map);
    }
  }

  /** ApiMessageType.highestSupportedVersion: Produce goes up to v14. */
  static final class AdvertiseV14 {
    @Advice.OnMethodExit
    static void exit(
        @Advice.FieldValue("apiKey") short apiKey, @Advice.Return(readOnly = false) short version) {
      if (apiKey == 0 && version == 13) {
        version = 14;
      }
    }
  }

  /** Produce data read(Readable, short): v14 has v13's body. */
  static final class ReadAsV13 {
    @Advice.OnMethodEnter
    static void enter(@Advice.Argument(value = 1, readOnly = false) short version) {
      if (version == 14) {
        version = 13;
      }
    }
  }

  /** Produce data write/addSize(..., short): v14 has v13's body. */
  static final class WriteAsV13 {
    @Advice.OnMethodEnter
    static void enter(@Advice.Argument(value = 2, readOnly = false) short version) {
      if (version == 14) {
        version = 13;
      }
    }
  }

  /** ProduceResponseData write/addSize: add tag 1 to every partition, then write as v13. */
  static final class ResponseV14 {
    @Advice.OnMethodEnter
    static void enter(@Advice.This Object data, @Advice.Argument(value = 2, readOnly = false) short version) {
      if (version == 14) {
        Windows.tagResponse(data);
        version = 13;
      }
    }
  }

  /** UnifiedLog.create(dir, config, ...): know the window before producer state is loaded. */
  static final class RegisterFromCreate {
    @Advice.OnMethodEnter
    static void enter(@Advice.Argument(0) Object dir, @Advice.Argument(1) Object config) {
      Windows.registerDir(dir, config);
    }
  }

  /** UnifiedLog constructor and updateConfig: the topic's window, also after a config change. */
  static final class RegisterLog {
    @Advice.OnMethodExit
    static void exit(@Advice.This Object log) {
      Windows.registerLog(log);
    }
  }

  /** ProducerStateManager / ProducerAppendInfo: their partition's window for this call. */
  static final class ScopeWindow {
    @Advice.OnMethodEnter
    static int enter(@Advice.FieldValue("topicPartition") Object tp) {
      return Windows.enter(tp);
    }

    @Advice.OnMethodExit(onThrowable = Throwable.class)
    static void exit(@Advice.Enter int previous) {
      Windows.exit(previous);
    }
  }

  /** ProducerStateEntry.addBatchMetadata: evict down to the window instead of 5. */
  static final class RetainWindow {
    @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
    static boolean enter(@Advice.FieldValue("batchMetadata") Object deque, @Advice.Argument(0) Object batch) {
      return Windows.addBatch(deque, batch);
    }
  }
}
