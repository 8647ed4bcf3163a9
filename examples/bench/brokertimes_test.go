package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseBrokerTimes reads request-log lines as Kafka's log4j layout
// writes them ("[time] DEBUG Completed request:{json} (logger)"): only
// produce requests (API key 0) count, other lines are skipped, means and
// the busy share are computed over the window.
func TestParseBrokerTimes(t *testing.T) {
	line := func(key int, total, queue, local, respQueue, send string) string {
		return `[2026-11-30 17:40:00,123] DEBUG Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":` +
			itoa(key) + `,"requestApiVersion":13,"correlationId":7,"clientId":"x"},"request":{"acks":-1},"response":{},` +
			`"connection":"127.0.0.1:9092-127.0.0.1:5000-0","totalTimeMs":` + total + `,"requestQueueTimeMs":` + queue +
			`,"localTimeMs":` + local + `,"remoteTimeMs":0.0,"throttleTimeMs":0,"responseQueueTimeMs":` + respQueue +
			`,"sendTimeMs":` + send + `,"securityProtocol":"PLAINTEXT"} (kafka.request.logger)`
	}
	log := strings.Join([]string{
		`[2026-11-30 17:40:00,000] INFO some other line (kafka.server.KafkaApis)`,
		line(0, "1.0", "0.1", "0.5", "0.2", "0.2"),
		line(3, "9.0", "9.0", "9.0", "9.0", "9.0"), // metadata: not counted
		line(0, "3.0", "0.3", "1.5", "0.6", "0.6"),
	}, "\n")
	bt, err := parseBrokerTimes(strings.NewReader(log), 0.5)
	require.NoError(t, err)
	assert.Equal(t, 2, bt.n)
	assert.Equal(t, 2*time.Millisecond, bt.total)
	assert.Equal(t, 200*time.Microsecond, bt.queue)
	assert.Equal(t, time.Millisecond, bt.local)
	assert.Equal(t, 400*time.Microsecond, bt.responseQueue)
	assert.Equal(t, 400*time.Microsecond, bt.send)
	assert.Equal(t, 3*time.Millisecond, bt.max)
	assert.InDelta(t, 0.004/0.5, bt.busy, 1e-12)

	_, err = parseBrokerTimes(strings.NewReader(line(3, "1", "1", "1", "1", "1")), 1)
	require.Error(t, err, "no produce request is an error, not zeros")
	assert.Contains(t, err.Error(), "Completed request", "the error shows a line, to fix the parser by")
}

func itoa(n int) string { return strconv.Itoa(n) }
