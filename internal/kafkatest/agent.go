package kafkatest

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// agentSources is the KIP-1269 agent's Java source (see
// kip1269agent/README.md).
//
//go:embed kip1269agent/src
var agentSources embed.FS

// agentMainClass is the agent's Premain-Class.
const agentMainClass = "dev.longhaul.kip1269.Agent"

// AgentLogPrefix starts every line the agent prints on the broker's
// stdout.
const AgentLogPrefix = "kip1269-agent: "

// AgentPatchedClasses are the Kafka classes the agent patches; a broker
// started with the agent must log "kip1269-agent: patched C" for each.
var AgentPatchedClasses = []string{
	"org.apache.kafka.storage.internals.log.LogConfig",
	"kafka.server.KafkaConfig",
	"org.apache.kafka.common.message.ApiMessageType",
	"org.apache.kafka.common.message.ProduceRequestData",
	"org.apache.kafka.common.message.ProduceResponseData",
	"org.apache.kafka.storage.internals.log.UnifiedLog",
	"org.apache.kafka.storage.internals.log.ProducerStateManager",
	"org.apache.kafka.storage.internals.log.ProducerAppendInfo",
	"org.apache.kafka.storage.internals.log.ProducerStateEntry",
}

// AgentSourceHash returns a hash of the agent's sources and of what it is
// built against (Kafka and Byte Buddy versions); the built jar is cached
// under it, so a changed source is rebuilt.
func AgentSourceHash() (string, error) { return sourceHash(agentSources) }

// sourceHash hashes every file of fsys (path and content) plus the
// Kafka and Byte Buddy versions.
func sourceHash(fsys fs.FS) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "kafka %s\nbyte-buddy %s\n", Version, ByteBuddyVersion)
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// AgentJarPath returns where [EnsureAgent] puts the agent jar for the
// current sources inside cacheDir.
func AgentJarPath(cacheDir string) (string, error) {
	sum, err := AgentSourceHash()
	if err != nil {
		return "", err
	}
	return filepath.Join(cacheDir, "kip1269-agent-"+sum[:16], "kip1269-agent.jar"), nil
}

// EnsureAgent returns the path of the KIP-1269 agent jar, building it
// when the cache has none for the current sources: [EnsureJars], then
// javac against the Kafka jars and Byte Buddy, then one self-contained
// jar (the agent's classes and Byte Buddy's), so that
// -javaagent:<path> works with any Kafka 4.4 installation. Concurrent
// builds are serialised with the cache's file lock. It returns
// [ErrMissingTools] without java, javac or mvn.
func EnsureAgent(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (string, error) {
	libs, err := EnsureJars(ctx, cacheDir, logf)
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return "", ErrMissingTools
	}
	agentLibs, err := ensureAgentLibs(ctx, cacheDir, logf)
	if err != nil {
		return "", err
	}
	jar, err := AgentJarPath(cacheDir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	unlock, err := lockFile(filepath.Join(cacheDir, ".lock"))
	if err != nil {
		return "", fmt.Errorf("kafkatest: lock cache: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	if logf != nil {
		logf("kafkatest: building the KIP-1269 agent into %s", jar)
	}
	work, err := os.MkdirTemp(cacheDir, "agent-build-")
	if err != nil {
		return "", fmt.Errorf("kafkatest: agent build dir: %w", err)
	}
	defer os.RemoveAll(work)
	src, classes := filepath.Join(work, "src"), filepath.Join(work, "classes")
	var files []string
	err = fs.WalkDir(agentSources, "kip1269agent/src", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".java") {
			return err
		}
		b, err := agentSources.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(src, filepath.FromSlash(strings.TrimPrefix(path, "kip1269agent/src/")))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		files = append(files, dst)
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("kafkatest: agent sources: %w", err)
	}
	bb := filepath.Join(agentLibs, "byte-buddy-"+ByteBuddyVersion+".jar")
	args := append([]string{"--release", "17", "-nowarn", "-encoding", "UTF-8",
		"-cp", filepath.Join(libs, "*") + string(os.PathListSeparator) + bb,
		"-d", classes}, files...)
	cmd := exec.CommandContext(ctx, "javac", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkatest: javac of the KIP-1269 agent: %w\n%s", err, tail(out.String(), 40))
	}
	if err := os.MkdirAll(filepath.Dir(jar), 0o755); err != nil {
		return "", err
	}
	tmp := jar + ".tmp"
	if err := writeAgentJar(tmp, classes, bb); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("kafkatest: write agent jar: %w", err)
	}
	if err := os.Rename(tmp, jar); err != nil {
		return "", fmt.Errorf("kafkatest: install agent jar: %w", err)
	}
	return jar, nil
}

// writeAgentJar writes the agent jar: manifest, the compiled classes,
// then Byte Buddy's classes (without its manifest, signatures and module
// descriptors), so the jar needs nothing else on the classpath.
func writeAgentJar(path, classes, byteBuddy string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	w, err := zw.Create("META-INF/MANIFEST.MF")
	if err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(w, "Manifest-Version: 1.0\r\nPremain-Class: %s\r\nCreated-By: longhaul internal/kafkatest (KIP-1269 test agent, Kafka %s, Byte Buddy %s)\r\n\r\n",
		agentMainClass, Version, ByteBuddyVersion)
	err = filepath.WalkDir(classes, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(classes, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err == nil {
		err = copyJarClasses(zw, byteBuddy)
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyJarClasses copies the entries of the jar at path into zw, except
// its manifest, signature files and module descriptors.
func copyJarClasses(zw *zip.Writer, path string) error {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, e := range zr.File {
		name := e.Name
		if strings.HasSuffix(name, "/") || name == "META-INF/MANIFEST.MF" ||
			strings.HasSuffix(name, "module-info.class") ||
			(strings.HasPrefix(name, "META-INF/") && slices.ContainsFunc([]string{".SF", ".RSA", ".DSA", ".EC"}, func(s string) bool { return strings.HasSuffix(name, s) })) {
			continue
		}
		r, err := e.Open()
		if err != nil {
			return err
		}
		w, err := zw.Create(name)
		if err == nil {
			_, err = io.Copy(w, r)
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// AgentFlag returns the JVM flag that loads the agent jar with args
// ("" for none, or for example "tag=always").
func AgentFlag(jar, args string) string {
	if args == "" {
		return "-javaagent:" + jar
	}
	return "-javaagent:" + jar + "=" + args
}

// checkAgentLog checks a broker's stdout from one start: with the agent,
// every class of [AgentPatchedClasses] logged as patched and nothing
// logged as FAILED; without it, no agent line at all. It is what makes a
// Kafka upgrade that renames a patched method fail loudly.
func checkAgentLog(out string, withAgent bool) error {
	if !withAgent {
		if i := strings.Index(out, AgentLogPrefix); i >= 0 {
			return fmt.Errorf("kafkatest: node started without the agent logged %q", firstLine(out[i:]))
		}
		return nil
	}
	if i := strings.Index(out, AgentLogPrefix+"FAILED"); i >= 0 {
		return fmt.Errorf("kafkatest: KIP-1269 agent: %s", firstLine(out[i:]))
	}
	var missing []string
	for _, c := range AgentPatchedClasses {
		if !strings.Contains(out, AgentLogPrefix+"patched "+c+"\n") {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kafkatest: KIP-1269 agent did not patch %v: the broker would run stock Kafka", missing)
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
