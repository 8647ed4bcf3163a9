package kafkatest

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Listener is an extra listener on every node, for security tests: the
// harness binds it to a free 127.0.0.1 port, advertises it, and adds its
// per-listener broker config. Inter-broker and controller traffic stay on
// the harness's plaintext listeners.
type Listener struct {
	// Name is the listener name: upper-case letters, digits and '_',
	// not DIRECT, PROXIED or CONTROLLER.
	Name string
	// Protocol is its security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or
	// SASL_SSL.
	Protocol string
	// Config is broker config for this listener only, without the
	// "listener.name.<name>." prefix, for example "ssl.keystore.location"
	// or "plain.sasl.jaas.config".
	Config map[string]string
}

var listenerName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// reserveListeners picks an address for each extra listener of n.
func (n *node) reserveListeners(ls []Listener, reserve func() (string, error)) error {
	n.listeners = make(map[string]string, len(ls))
	for _, l := range ls {
		switch {
		case !listenerName.MatchString(l.Name):
			return fmt.Errorf("kafkatest: listener name %q: want upper-case letters, digits and _", l.Name)
		case l.Name == listenerDirect || l.Name == listenerProxied || l.Name == listenerController:
			return fmt.Errorf("kafkatest: listener name %q is the harness's own", l.Name)
		case n.listeners[l.Name] != "":
			return fmt.Errorf("kafkatest: listener %q twice", l.Name)
		}
		switch l.Protocol {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return fmt.Errorf("kafkatest: listener %s: protocol %q", l.Name, l.Protocol)
		}
		addr, err := reserve()
		if err != nil {
			return err
		}
		n.listeners[l.Name] = addr
	}
	n.listenerSpecs = ls
	return nil
}

// addListeners appends n's extra listeners to the listener properties in p
// and adds their per-listener config.
func addListeners(p map[string]string, n *node) {
	for _, l := range n.listenerSpecs {
		addr := n.listeners[l.Name]
		p["listeners"] += fmt.Sprintf(",%s://%s", l.Name, addr)
		p["advertised.listeners"] += fmt.Sprintf(",%s://%s", l.Name, addr)
		p["listener.security.protocol.map"] += fmt.Sprintf(",%s:%s", l.Name, l.Protocol)
		prefix := "listener.name." + strings.ToLower(l.Name) + "."
		for k, v := range l.Config {
			p[prefix+k] = v
		}
	}
}

// ListenerBootstrap returns the extra listener name of every node,
// comma-separated (the form of bootstrap.servers).
func (c *Cluster) ListenerBootstrap(name string) string {
	return c.joinAddrs(func(n *node) string { return n.listeners[name] })
}

// SASLListenerConfig returns the per-listener config of a SASL listener
// that accepts PLAIN for the plainUsers (name to password) and
// SCRAM-SHA-256 and SCRAM-SHA-512 for users added with
// [Cluster.AddSCRAMUser]. Merge TLS settings into it for SASL_SSL.
func SASLListenerConfig(plainUsers map[string]string) map[string]string {
	var jaas strings.Builder
	jaas.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
	for _, u := range slices.Sorted(maps.Keys(plainUsers)) {
		fmt.Fprintf(&jaas, " user_%s=%q", u, plainUsers[u])
	}
	jaas.WriteString(";")
	return map[string]string{
		"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"plain.sasl.jaas.config":         jaas.String(),
		"scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
	}
}

// TLSListenerConfig returns per-listener config for a PEM key store file
// (private key, encrypted with keyPassword if not empty, and certificate
// chain) and, if truststore is not empty, a PEM trust store file used to
// verify clients; clientAuth is required, requested or none.
func TLSListenerConfig(keystore, keyPassword, truststore, clientAuth string) map[string]string {
	m := map[string]string{
		"ssl.keystore.type":     "PEM",
		"ssl.keystore.location": keystore,
		"ssl.client.auth":       clientAuth,
	}
	if keyPassword != "" {
		m["ssl.key.password"] = keyPassword
	}
	if truststore != "" {
		m["ssl.truststore.type"] = "PEM"
		m["ssl.truststore.location"] = truststore
	}
	return m
}

// MergeConfig returns the union of maps, later ones winning.
func MergeConfig(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// AddSCRAMUser creates or replaces a SCRAM credential (mechanism
// SCRAM-SHA-256 or SCRAM-SHA-512) with AlterUserScramCredentials and waits
// until every running broker describes it, so a login right after works.
func (c *Cluster) AddSCRAMUser(ctx context.Context, mechanism, user, password string) error {
	var mech int8
	var h func() hash.Hash
	var size int
	switch mechanism {
	case "SCRAM-SHA-256":
		mech, h, size = 1, sha256.New, sha256.Size
	case "SCRAM-SHA-512":
		mech, h, size = 2, sha512.New, sha512.Size
	default:
		return fmt.Errorf("kafkatest: SCRAM mechanism %q", mechanism)
	}
	const iterations = 4096
	salt := make([]byte, 24)
	rand.Read(salt)
	salted, err := pbkdf2.Key(h, password, salt, iterations, size)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, mech, iterations, salt, salted
	req.Upsertions = append(req.Upsertions, up)
	resp, err := c.request(ctx, req)
	if err != nil {
		return fmt.Errorf("kafkatest: AlterUserScramCredentials: %w", err)
	}
	for _, r := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if r.ErrorCode != 0 {
			return fmt.Errorf("kafkatest: AlterUserScramCredentials %s: %w (%s)", r.User, kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
		}
	}
	for _, n := range c.running() {
		for {
			d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
			du := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			du.Name = user
			d.Users = append(d.Users, du)
			r, err := requestNode(ctx, n.directAddr, d)
			if err == nil && hasSCRAM(r.(*kmsg.DescribeUserSCRAMCredentialsResponse), user, mech) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafkatest: node %d never showed the SCRAM user %s: %w (last error %v)", n.id, user, ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func hasSCRAM(r *kmsg.DescribeUserSCRAMCredentialsResponse, user string, mech int8) bool {
	for _, res := range r.Results {
		if res.User != user || res.ErrorCode != 0 {
			continue
		}
		for _, ci := range res.CredentialInfos {
			if ci.Mechanism == mech {
				return true
			}
		}
	}
	return false
}
