package dev.longhaul.kip1269;

/**
 * The agent's arguments and its log. Free of Kafka and Byte Buddy types, so that the premain can
 * use it without loading any Kafka class before the transformer is installed.
 */
final class Settings {
  private Settings() {}

  /** Every line the agent prints starts with this. */
  static final String PREFIX = "kip1269-agent: ";

  /** Whether tag 1 is written also when the window is 5 (agent argument tag=always). */
  static volatile boolean alwaysTag;

  /** Parses the agent arguments: comma-separated, "tag=always" or "tag=default". */
  static void configure(String args) {
    if (args == null || args.isEmpty()) {
      return;
    }
    for (String a : args.split(",")) {
      switch (a.trim()) {
        case "tag=always":
          alwaysTag = true;
          break;
        case "tag=default":
          alwaysTag = false;
          break;
        case "":
          break;
        default:
          throw new IllegalArgumentException(PREFIX + "unknown argument \"" + a + "\" (want tag=always or tag=default)");
      }
    }
  }

  /** The Kafka release the agent is built for: major.minor, any patch release of it. */
  static final String SUPPORTED = "4.4";

  /**
   * The version in kafka-clients' kafka/kafka-version.properties, read as a resource so that no
   * Kafka class loads before the transformer is installed; null when there is none.
   */
  static String kafkaVersion(ClassLoader cl) {
    try (java.io.InputStream in = cl.getResourceAsStream("kafka/kafka-version.properties")) {
      if (in == null) {
        return null;
      }
      java.util.Properties p = new java.util.Properties();
      p.load(in);
      String v = p.getProperty("version");
      return v == null ? null : v.trim();
    } catch (java.io.IOException e) {
      return null;
    }
  }

  /** Why the agent refuses to run on Kafka version v, or null when it runs. */
  static String refusal(String v) {
    if (v == null) {
      return "refusing to start: no kafka/kafka-version.properties on the class path (is this a Kafka JVM?)";
    }
    if (!v.equals(SUPPORTED) && !v.startsWith(SUPPORTED + ".")) {
      return "refusing to start on Kafka " + v + ": this agent patches Kafka " + SUPPORTED + ".x only";
    }
    return null;
  }

  static void log(String msg) {
    System.out.println(PREFIX + msg);
    System.out.flush();
  }
}
