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

  static void log(String msg) {
    System.out.println(PREFIX + msg);
    System.out.flush();
  }
}
