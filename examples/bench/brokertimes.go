package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestLogger is Kafka's per-request logger: at DEBUG it writes one
// "Completed request:{json}" line per request with the broker's own timings.
const requestLogger = "kafka.request.logger"

// enableRequestLog sets Kafka's request logger to DEBUG on the node through
// IncrementalAlterConfigs (resource BROKER_LOGGER, KIP-412), so the node's log
// gets every request's timings (--broker-times). The logging costs the
// broker CPU: a diagnostic, not for the headline figures.
func enableRequestLog(ctx context.Context, bootstrap string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBrokerLogger
	res.ResourceName = "0"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name = requestLogger
	cfg.Op = kmsg.IncrementalAlterConfigOpSet
	v := "DEBUG"
	cfg.Value = &v
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("setting %s to DEBUG: %w", requestLogger, err)
		}
	}
	return nil
}

// brokerTimes summarizes the produce requests Kafka's request log shows
// for a case's measured window, in Kafka's own terms (RequestChannel): total
// is from the request read off the socket to its response written;
// queue is the wait for a request handler thread; local the handler's work
// (append to the log); responseQueue the wait for the network thread; send
// the write of the response. Kafka reads a connection's next request only
// once the previous response is written, so busy (the summed totals per
// second of the window) is the fraction of time the connection was being
// served: requests arriving meanwhile wait in the socket, unseen by total.
type brokerTimes struct {
	n                                             int
	total, queue, local, responseQueue, send, max time.Duration
	busy                                          float64
}

// requestLine is the part of a "Completed request" JSON line we read.
type requestLine struct {
	RequestHeader struct {
		RequestAPIKey int `json:"requestApiKey"`
	} `json:"requestHeader"`
	TotalTimeMs         float64 `json:"totalTimeMs"`
	RequestQueueTimeMs  float64 `json:"requestQueueTimeMs"`
	LocalTimeMs         float64 `json:"localTimeMs"`
	ResponseQueueTimeMs float64 `json:"responseQueueTimeMs"`
	SendTimeMs          float64 `json:"sendTimeMs"`
}

// parseBrokerTimes reads Kafka request-log lines from r and sums up the
// produce requests (API key 0) over a window of secs seconds.
func parseBrokerTimes(r io.Reader, secs float64) (brokerTimes, error) {
	var bt brokerTimes
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	marker := []byte("Completed request:")
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var sums [5]float64
	var sample string // a request line, for the error when none parses
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.Index(line, marker)
		if i < 0 {
			continue
		}
		js := line[i+len(marker):]
		// The layout appends " (kafka.request.logger)" after the JSON.
		if j := bytes.LastIndexByte(js, '}'); j >= 0 {
			js = js[:j+1]
		}
		if sample == "" {
			sample = string(line[:min(len(line), 600)])
		}
		var l requestLine
		if err := json.Unmarshal(js, &l); err != nil || l.RequestHeader.RequestAPIKey != 0 {
			continue
		}
		bt.n++
		sums[0] += l.TotalTimeMs
		sums[1] += l.RequestQueueTimeMs
		sums[2] += l.LocalTimeMs
		sums[3] += l.ResponseQueueTimeMs
		sums[4] += l.SendTimeMs
		bt.max = max(bt.max, ms(l.TotalTimeMs))
	}
	if err := sc.Err(); err != nil {
		return bt, err
	}
	if bt.n == 0 {
		return bt, fmt.Errorf("no produce request in the broker's request log (a request line: %q)", sample)
	}
	n := float64(bt.n)
	bt.total, bt.queue, bt.local, bt.responseQueue, bt.send = ms(sums[0]/n), ms(sums[1]/n), ms(sums[2]/n), ms(sums[3]/n), ms(sums[4]/n)
	if secs > 0 {
		bt.busy = sums[0] / 1000 / secs
	}
	return bt, nil
}

// logSize is the current size of the broker's log file, -1 if unknown.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// readBrokerTimes parses the log bytes between offsets from and to.
func readBrokerTimes(path string, from, to int64, secs float64) (brokerTimes, error) {
	if from < 0 || to < from {
		return brokerTimes{}, fmt.Errorf("log offsets %d..%d", from, to)
	}
	f, err := os.Open(path)
	if err != nil {
		return brokerTimes{}, err
	}
	defer f.Close()
	return parseBrokerTimes(io.NewSectionReader(f, from, to-from), secs)
}

// printBrokerTimes prints the broker-times table (--broker-times).
func printBrokerTimes(w io.Writer, rs []result) {
	fmt.Fprint(w, "\nBroker time per produce request (Kafka's request log, measured window; busy = summed total / window, the share of time the client's one connection was being served):\n\n")
	fmt.Fprintln(w, "| RTT | parts | batch | client | requests/s | total mean (max) | handler queue | local | response queue | send | busy |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		bt := r.brokerTimes
		if bt.n == 0 {
			continue
		}
		name := r.client.name
		if r.round > 0 {
			name += fmt.Sprintf(" #%d", r.round)
		}
		fmt.Fprintf(w, "| %v | %d | %s | %s | %.0f | %s (%s) | %s | %s | %s | %s | %.0f%% |\n",
			r.rtt, r.partitions, fmtBytes(r.batch), name, float64(bt.n)/r.seconds,
			fmtMs(bt.total), fmtMs(bt.max), fmtMs(bt.queue), fmtMs(bt.local), fmtMs(bt.responseQueue), fmtMs(bt.send), 100*bt.busy)
	}
}
