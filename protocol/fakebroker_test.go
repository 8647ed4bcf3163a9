package protocol

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a tiny broker for conn tests, built on our own frame
// functions: it answers ApiVersions (with configurable keys) and SASL, and
// hands every other request to handle, which answers through reply (any
// number of times, from any goroutine, in any order) or not at all. reply
// takes a kmsg.Response, or []byte written as is (garbage frames).
type fakeBroker struct {
	t      testing.TB
	keys   []kmsg.ApiVersionsResponseApiKey
	apiMax int16 // highest ApiVersions version it knows
	mechs  map[string]bool
	user   string
	pass   string
	handle func(h RequestHeader, req kmsg.Request, reply func(any))
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
	authed bool // set once a SASL exchange succeeded
	// lifetime is announced as SessionLifetimeMs in every successful
	// SaslAuthenticate answer (KIP-368).
	lifetime time.Duration
	onFrame  func(frame []byte)
	// features are the finalized features of ApiVersions v3+ answers,
	// at epoch featuresEpoch.
	features      []kmsg.ApiVersionsResponseFinalizedFeature
	featuresEpoch int64
}

// allKeys advertises every key kmsg knows at 0..max (Produce up to 14).
func allKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k := int16(0); k < 100; k++ {
		if m := maxVersion(k); m >= 0 {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: m})
		}
	}
	return keys
}

func withKey(keys []kmsg.ApiVersionsResponseApiKey, key, minV, maxV int16) []kmsg.ApiVersionsResponseApiKey {
	out := []kmsg.ApiVersionsResponseApiKey{}
	for _, k := range keys {
		if k.ApiKey != key {
			out = append(out, k)
		}
	}
	if maxV >= 0 {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: minV, MaxVersion: maxV})
	}
	return out
}

func newFakeBroker(t testing.TB) *fakeBroker {
	return &fakeBroker{t: t, keys: allKeys(), apiMax: maxVersion(18)}
}

// pipeDial is a DialConfig.Dial serving the other end of a net.Pipe, for
// tests on synctest's virtual clock.
func (b *fakeBroker) pipeDial(context.Context, string, string) (net.Conn, error) {
	cli, srv := net.Pipe()
	b.serve(srv)
	return cli, nil
}

// listen serves on 127.0.0.1 until the test ends.
func (b *fakeBroker) listen() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.t.Fatal(err)
	}
	b.ln = ln
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.serve(nc)
		}
	}()
	b.t.Cleanup(b.stop)
	return ln.Addr().String()
}

func (b *fakeBroker) stop() {
	if b.ln != nil {
		b.ln.Close()
	}
	b.closeConns()
	b.wg.Wait()
}

func (b *fakeBroker) closeConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}

// serve handles one connection on a new goroutine.
func (b *fakeBroker) serve(nc net.Conn) {
	b.mu.Lock()
	b.conns = append(b.conns, nc)
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer nc.Close()
		var wmu sync.Mutex
		reply := func(id int32) func(any) {
			return func(resp any) {
				wmu.Lock()
				defer wmu.Unlock()
				switch r := resp.(type) {
				case []byte:
					nc.Write(r)
				case kmsg.Response:
					nc.Write(AppendResponse(nil, id, r))
				}
			}
		}
		var sc scramServer
		for {
			frame, err := ReadFrame(nc, nil, 0)
			if err != nil {
				return
			}
			if b.onFrame != nil {
				b.onFrame(frame)
			}
			h, req, err := ParseRequest(frame)
			if h.Key == 18 && (errors.Is(err, ErrUnsupportedVersion) || h.Version > b.apiMax) {
				// What Kafka does: a v0 answer listing its keys.
				resp := kmsg.NewPtrApiVersionsResponse()
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				resp.ApiKeys = b.keys
				reply(h.CorrelationID)(resp)
				continue
			}
			if err != nil {
				b.t.Errorf("fake broker: %v", err)
				return
			}
			switch r := req.(type) {
			case *kmsg.ApiVersionsRequest:
				resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
				resp.ApiKeys = b.keys
				if len(b.features) > 0 {
					resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch = b.features, b.featuresEpoch
				}
				reply(h.CorrelationID)(resp)
			case *kmsg.SASLHandshakeRequest:
				resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
				for m := range b.mechs {
					resp.SupportedMechanisms = append(resp.SupportedMechanisms, m)
				}
				if !b.mechs[r.Mechanism] {
					resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
				}
				sc.mech = r.Mechanism
				reply(h.CorrelationID)(resp)
			case *kmsg.SASLAuthenticateRequest:
				resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
				out, done, ok := b.saslStep(&sc, r.SASLAuthBytes)
				if !ok {
					resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
					msg := "bad credentials"
					resp.ErrorMessage = &msg
				}
				resp.SASLAuthBytes = out
				if done && ok {
					resp.SessionLifetimeMillis = b.lifetime.Milliseconds()
					b.mu.Lock()
					b.authed = true
					b.mu.Unlock()
				}
				reply(h.CorrelationID)(resp)
			default:
				if b.handle != nil {
					b.handle(h, req, reply(h.CorrelationID))
				}
			}
		}
	}()
}

// scramServer is the broker side of SCRAM-SHA-256 (RFC 5802), enough to
// check our client exchange end to end.
type scramServer struct {
	mech        string
	step        int
	clientBare  string
	serverFirst string
	nonce       string
}

const scramSalt, scramIter = "pepper-salt", 4096

func (b *fakeBroker) saslStep(s *scramServer, in []byte) (out []byte, done, ok bool) {
	switch s.mech {
	case "PLAIN":
		parts := strings.Split(string(in), "\x00")
		return nil, true, len(parts) == 3 && parts[1] == b.user && parts[2] == b.pass
	case "SCRAM-SHA-256":
	default:
		return nil, true, false
	}
	salted, _ := pbkdf2.Key(sha256.New, b.pass, []byte(scramSalt), scramIter, sha256.Size)
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	attr := func(msg, name string) string {
		for _, f := range strings.Split(msg, ",") {
			if v, ok := strings.CutPrefix(f, name+"="); ok {
				return v
			}
		}
		return ""
	}
	s.step++
	switch s.step {
	case 1: // client-first: gs2 header "n,," then the bare message
		msg := string(in)
		i := strings.Index(msg, ",")
		j := strings.Index(msg[i+1:], ",")
		if i < 0 || j < 0 {
			return nil, true, false
		}
		s.clientBare = msg[i+j+2:]
		if attr(s.clientBare, "n") != b.user {
			return nil, true, false
		}
		buf := make([]byte, 12)
		rand.Read(buf)
		s.nonce = attr(s.clientBare, "r") + base64.RawStdEncoding.EncodeToString(buf)
		s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString([]byte(scramSalt)) + ",i=4096"
		return []byte(s.serverFirst), false, true
	case 2: // client-final: c=...,r=...,p=proof
		msg := string(in)
		k := strings.LastIndex(msg, ",p=")
		if k < 0 || attr(msg, "r") != s.nonce {
			return nil, true, false
		}
		proof, err := base64.StdEncoding.DecodeString(msg[k+3:])
		if err != nil {
			return nil, true, false
		}
		authMsg := s.clientBare + "," + s.serverFirst + "," + msg[:k]
		clientKey := mac(salted, "Client Key")
		stored := sha256.Sum256(clientKey)
		sig := mac(stored[:], authMsg)
		got := make([]byte, len(proof))
		for i := range proof {
			got[i] = proof[i] ^ sig[i%len(sig)]
		}
		if h := sha256.Sum256(got); !bytes.Equal(h[:], stored[:]) {
			return nil, true, false
		}
		serverSig := mac(mac(salted, "Server Key"), authMsg)
		return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, true
	}
	return nil, true, false
}
