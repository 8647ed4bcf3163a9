package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// KDCRealm is the realm of every [StartKDC] KDC.
const KDCRealm = "LONGHAUL.TEST"

// KDCOptions configures [StartKDC]. The zero value gives tickets of 10
// hours, renewable for 7 days.
type KDCOptions struct {
	// MaxLife and MaxRenew bound every ticket's lifetime and renewable
	// lifetime, in MIT duration syntax ("1m", "0:01:30", "10h"); short
	// values test renewal.
	MaxLife, MaxRenew string
}

// KDC is an MIT Kerberos KDC on loopback started by [StartKDC] with
// scripts/start-kdc.sh: realm [KDCRealm], everything in its own
// directory. Methods are safe for concurrent use.
type KDC struct {
	// Dir holds its configs, database and log.
	Dir string
	// Krb5Conf is the krb5.conf for clients (gokrb5, kinit, Java with
	// [KDC.JVMFlag]).
	Krb5Conf string
	// Addr is its host:port, UDP and TCP.
	Addr string

	mu     sync.Mutex // serialises kadmin.local
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
}

// kdcScript is scripts/start-kdc.sh, found from this file's own path: the
// harness runs from the repository (this module or a plugin module that
// replaces it with its checkout).
func kdcScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kafkatest: cannot locate scripts/start-kdc.sh")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "start-kdc.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	return p, nil
}

// kdcTool finds an MIT Kerberos admin tool on PATH or in /usr/sbin.
func kdcTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: %s not found (install MIT Kerberos: apt-get install -y krb5-kdc krb5-admin-server krb5-user)", ErrMissingTools, name)
}

// StartKDC starts a KDC for the test and stops it in t.Cleanup. Without
// MIT Kerberos's krb5kdc, kdb5_util and kadmin.local it skips the test,
// except with LONGHAUL_REQUIRE_KAFKA=1, where it fails. A port lost to
// another process between picking and binding is retried, twice.
func StartKDC(t testing.TB, o KDCOptions) *KDC {
	t.Helper()
	for _, tool := range []string{"krb5kdc", "kdb5_util", "kadmin.local"} {
		if _, err := kdcTool(tool); err != nil {
			if !required() {
				t.Skipf("%v (LONGHAUL_REQUIRE_KAFKA=1 makes this a failure)", err)
			}
			t.Fatal(err)
		}
	}
	script, err := kdcScript()
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxLife == "" {
		o.MaxLife = "10h"
	}
	if o.MaxRenew == "" {
		o.MaxRenew = "7d"
	}
	var last error
	for range 3 {
		k, err := startKDC(script, t.TempDir(), o)
		if err == nil {
			t.Cleanup(k.stop)
			t.Logf("kafkatest: KDC for %s on %s (tickets %s, renewable %s)", KDCRealm, k.Addr, o.MaxLife, o.MaxRenew)
			return k
		}
		last = err
	}
	t.Fatalf("kafkatest: start KDC: %v", last)
	return nil
}

func startKDC(script, dir string, o KDCOptions) (*KDC, error) {
	port, err := freeUDPAndTCPPort()
	if err != nil {
		return nil, err
	}
	k := &KDC{
		Dir:      dir,
		Krb5Conf: filepath.Join(dir, "krb5.conf"),
		Addr:     fmt.Sprintf("127.0.0.1:%d", port),
		out:      new(bytes.Buffer),
		exited:   make(chan struct{}),
	}
	k.cmd = exec.Command("bash", script, dir, KDCRealm, fmt.Sprint(port), o.MaxLife, o.MaxRenew)
	k.cmd.Stdout, k.cmd.Stderr = &lockedWriter{w: k.out, mu: &k.mu}, &lockedWriter{w: k.out, mu: &k.mu}
	setDeathSignal(k.cmd)
	// Started from a goroutine locked to its thread until the KDC exits:
	// the parent-death signal is tied to the creating thread (see
	// node.start).
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer close(k.exited)
		if err := k.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		k.cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", k.Addr, time.Second)
		if err == nil {
			c.Close()
			return k, nil
		}
		select {
		case <-k.exited:
			return nil, fmt.Errorf("KDC exited: %s", k.output())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			k.stop()
			return nil, fmt.Errorf("KDC not listening on %s after 30s: %s", k.Addr, k.output())
		}
	}
}

// freeUDPAndTCPPort returns a loopback port free for both UDP and TCP
// at the time of the call.
func freeUDPAndTCPPort() (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		ln.Close()
		if err == nil {
			pc.Close()
			return port, nil
		}
	}
	return 0, errors.New("kafkatest: no port free for both UDP and TCP")
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (k *KDC) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return tail(k.out.String(), 20)
}

func (k *KDC) stop() {
	k.cmd.Process.Kill()
	<-k.exited
}

// JVMFlag is the JVM flag that points Java's Kerberos at this KDC, for
// [Options.JVMFlags].
func (k *KDC) JVMFlag() string { return "-Djava.security.krb5.conf=" + k.Krb5Conf }

// Env is the environment for MIT tools (kinit, klist) and gokrb5 users
// that read KRB5_CONFIG.
func (k *KDC) Env() []string {
	return []string{"KRB5_CONFIG=" + k.Krb5Conf, "KRB5_KDC_PROFILE=" + filepath.Join(k.Dir, "kdc.conf")}
}

// Admin runs one kadmin.local query (for example "addprinc -pw secret
// alice") and returns its output.
func (k *KDC) Admin(query string) (string, error) {
	tool, err := kdcTool("kadmin.local")
	if err != nil {
		return "", err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, "-r", KDCRealm, "-q", query)
	cmd.Env = append(os.Environ(), k.Env()...)
	out, err := cmd.CombinedOutput()
	// kadmin.local reports a failed query on stderr with exit status 0.
	if err == nil && (bytes.Contains(out, []byte("while ")) || bytes.Contains(out, []byte("usage:"))) {
		err = errors.New("query failed")
	}
	if err != nil {
		return string(out), fmt.Errorf("kafkatest: kadmin.local %q: %w\n%s", query, err, out)
	}
	return string(out), nil
}

// AddPrincipal creates principal name (without realm) with password, or
// with a random key if password is empty.
func (k *KDC) AddPrincipal(t testing.TB, name, password string) {
	t.Helper()
	q := "addprinc -randkey " + name
	if password != "" {
		q = fmt.Sprintf("addprinc -pw %s %s", password, name)
	}
	if _, err := k.Admin(q); err != nil {
		t.Fatal(err)
	}
}

// Keytab writes the current keys of the principals (without realm) to a
// new keytab file in the KDC's directory and returns its path. The keys
// are kept (-norandkey), so a password stays valid.
func (k *KDC) Keytab(t testing.TB, file string, principals ...string) string {
	t.Helper()
	p := filepath.Join(k.Dir, file)
	if _, err := k.Admin(fmt.Sprintf("ktadd -k %s -norandkey %s", p, strings.Join(principals, " "))); err != nil {
		t.Fatal(err)
	}
	return p
}

// Log returns the KDC's log: one line per AS_REQ (login) and TGS_REQ
// (service ticket or renewal) it answered.
func (k *KDC) Log() string {
	b, _ := os.ReadFile(filepath.Join(k.Dir, "kdc.log"))
	return string(b)
}

// GSSAPIListenerConfig returns the per-listener config of a SASL listener
// that accepts GSSAPI for service name service, the broker logging in
// with principal (with realm) from keytab.
func GSSAPIListenerConfig(service, keytab, principal string) map[string]string {
	return map[string]string{
		"sasl.enabled.mechanisms":    "GSSAPI",
		"sasl.kerberos.service.name": service,
		"gssapi.sasl.jaas.config": fmt.Sprintf(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab=%q principal=%q;`,
			keytab, principal),
	}
}
