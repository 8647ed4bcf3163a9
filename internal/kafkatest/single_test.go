package kafkatest

import "testing"

// TestSingleNode runs the single-node checks against one broker, started
// once (a JVM start costs 4-10 s on a loaded 2-core machine). Each subtest
// uses its own topics; subtests that set a proxy delay reset it.
func TestSingleNode(t *testing.T) {
	c := Start(t, Options{})
	t.Run("ProduceVersions", func(t *testing.T) { testProbeProduceVersions(t, c) })
	t.Run("ProduceResponseTag1", func(t *testing.T) { testProbeProduceResponseTag1(t, c) })
	t.Run("KgoIdempotentThroughProxyWithCuts", func(t *testing.T) { testKgoIdempotentThroughProxyWithCuts(t, c) })
	t.Run("JavaPerf", func(t *testing.T) { testRunJavaPerfSmall(t, c) })
	t.Run("LonghaulProduceVersion", func(t *testing.T) { testLonghaulProduceVersion(t, c) })
	t.Run("LonghaulMillionExactlyOnce", func(t *testing.T) { testLonghaulMillionExactlyOnce(t, c) })
	t.Run("LonghaulMillionThroughProxyWithCuts", func(t *testing.T) { testLonghaulMillionThroughProxyWithCuts(t, c) })
	t.Run("PerfSideBySideSmoke", func(t *testing.T) { testPerfSideBySideSmoke(t, c) })
	t.Run("BenchSupport", func(t *testing.T) { testBenchSupport(t, c) })
	t.Run("SettleAfterCut", func(t *testing.T) { testSettleAfterCut(t, c) })
}
