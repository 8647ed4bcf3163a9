package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/linkproxy"
)

// stopGrace is how long a JVM gets after SIGTERM before SIGKILL. Test data
// is thrown away, so a clean shutdown only matters for RestartNode; a
// combined node usually exits in 1-3 s.
const stopGrace = 10 * time.Second

// finalStopGrace is the grace of [Cluster.Stop]: the data is deleted right
// after, so a slow controlled shutdown (all voters leaving at once) is cut
// short.
const finalStopGrace = 3 * time.Second

// node is one JVM: broker and controller. Fields above mu are set before
// the first start and never change.
type node struct {
	id             int32
	dir            string
	directAddr     string // DIRECT listener, also inter-broker
	proxiedListen  string // PROXIED listener's real address
	advertised     string // PROXIED listener's advertised address
	controllerAddr string
	proxy          *linkproxy.Proxy  // nil with Options.Advertise
	listeners      map[string]string // extra listener name -> address (security.go)
	listenerSpecs  []Listener

	// mu guards the following.
	mu      sync.Mutex
	jvmArgs []string
	agent   bool // runs with the KIP-1269 agent
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	outAt   int64         // size of stdout.log when cmd started
}

// signal applies send (pause, resume) to the running process.
func (n *node) signal(send func(*exec.Cmd) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return errors.New("not running")
	}
	return send(n.cmd)
}

func (n *node) dataDir() string    { return filepath.Join(n.dir, "data") }
func (n *node) propsPath() string  { return filepath.Join(n.dir, "server.properties") }
func (n *node) logPath() string    { return filepath.Join(n.dir, "server.log") }
func (n *node) stdoutPath() string { return filepath.Join(n.dir, "stdout.log") }

// start launches the JVM. The process is started from a goroutine locked
// to its OS thread that stays until the process exits: the parent-death
// signal is tied to the creating thread, and Go may otherwise retire that
// thread and kill a healthy broker with it.
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited:
		default:
			return fmt.Errorf("kafkatest: node %d already running", n.id)
		}
	}
	out, err := os.OpenFile(n.stdoutPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	outAt, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		out.Close()
		return err
	}
	args := append(append([]string{}, n.jvmArgs...), "kafka.Kafka", n.propsPath())
	cmd := exec.Command("java", args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread exits with this goroutine, after
		// the JVM has.
		defer close(exited)
		defer out.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("kafkatest: start node %d: %w", n.id, err)
	}
	n.cmd, n.exited, n.outAt = cmd, exited, outAt
	return nil
}

// checkAgent checks the stdout of the current start for the KIP-1269
// agent's patch log (see checkAgentLog). Call it once the node answers:
// the agent logs in its premain, before Kafka starts.
func (n *node) checkAgent() error {
	n.mu.Lock()
	at, agent := n.outAt, n.agent
	n.mu.Unlock()
	b, err := os.ReadFile(n.stdoutPath())
	if err != nil {
		return err
	}
	if at > int64(len(b)) {
		at = 0
	}
	if err := checkAgentLog(string(b[at:]), agent); err != nil {
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	return nil
}

// exitedCh returns a channel closed when the current process exits, or a
// closed channel when none runs.
func (n *node) exitedCh() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.exited
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits; grace 0
// kills at once. It is a no-op when the node is not running.
func (n *node) stop(grace time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	if grace > 0 {
		terminate(cmd)
	}
	select {
	case <-exited:
		return
	case <-time.After(grace):
	}
	cmd.Process.Kill()
	<-exited
}

// waitReady polls ApiVersions on the DIRECT listener until it answers, the
// process exits (errPortTaken if it failed to bind) or ctx ends.
func (n *node) waitReady(ctx context.Context) error {
	exited := n.exitedCh()
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := APIVersions(actx, n.directAddr)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			if n.logContains("Address already in use") {
				return fmt.Errorf("node %d: %w", n.id, errPortTaken)
			}
			return fmt.Errorf("kafkatest: node %d exited during startup:\n%s", n.id, n.logTail(30))
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: node %d not answering ApiVersions on %s: %w (last error %v)\n%s",
				n.id, n.directAddr, ctx.Err(), err, n.logTail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *node) logContains(s string) bool {
	for _, p := range []string{n.stdoutPath(), n.logPath()} {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// logTail returns the last lines of the broker log and of stdout/stderr.
func (n *node) logTail(lines int) string {
	var b strings.Builder
	for _, p := range []string{n.logPath(), n.stdoutPath()} {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- node %d %s (tail)\n%s\n", n.id, filepath.Base(p), tail(string(data), lines))
	}
	return b.String()
}

// format runs the storage tool for this node's log dir.
func (n *node) format(ctx context.Context, classpath, clusterID, toolLog string, features map[string]int) error {
	args := []string{"-Xmx256m", "-cp", classpath,
		"-Dlog4j2.configurationFile=" + toolLog,
		"kafka.tools.StorageTool", "format", "-t", clusterID, "-c", n.propsPath()}
	names := make([]string, 0, len(features))
	for name := range features {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "--feature", name+"="+strconv.Itoa(features[name]))
	}
	cmd := exec.CommandContext(ctx, "java", args...)
	setDeathSignal(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafkatest: format node %d: %w\n%s", n.id, err, out)
	}
	return nil
}

// jvmArgs returns the JVM flags of a broker.
func brokerJVMArgs(heapMB int, classpath, dir, log4j string) []string {
	h := strconv.Itoa(heapMB) + "m"
	return []string{
		"-Xms" + h, "-Xmx" + h,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + log4j,
		"-Dkafka.logs.dir=" + dir,
		"-cp", classpath,
	}
}
