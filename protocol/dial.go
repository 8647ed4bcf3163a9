package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsVersion is the ApiVersions version Dial asks first; brokers
// that do not know it answer UNSUPPORTED_VERSION in a v0 body listing what
// they do support.
const apiVersionsVersion = 3

// Dial connects to addr, optionally wraps it in TLS, negotiates versions
// with ApiVersions (v3, retrying at the broker's advertised maximum or v0
// when the broker answers UNSUPPORTED_VERSION), authenticates with SASL if
// configured, and returns a ready [Conn] with its reader and writer
// goroutines running. ctx bounds the whole handshake; cancelling it later
// does not affect the returned Conn. On any failure the connection is
// closed and nothing keeps running.
func Dial(ctx context.Context, addr string, cfg DialConfig) (*Conn, error) {
	dial := cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("protocol: dial %s: %w", addr, err)
	}
	c, err := handshake(ctx, nc, addr, cfg)
	if err != nil {
		nc.Close()
		// The conn deadline and ctx's own timer fire at the same instant;
		// report the ctx error even if ctx has not noticed yet.
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		} else if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("protocol: dial %s: %w", addr, err)
	}
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

func handshake(ctx context.Context, nc net.Conn, addr string, cfg DialConfig) (*Conn, error) {
	// The handshake runs synchronously on the raw conn; ctx ends it by
	// moving the deadline into the past.
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d)
	}
	// The callback gets the raw conn in its own variable: nc becomes the
	// TLS conn below while the callback may run on another goroutine, and
	// the raw conn's deadline ends the TLS handshake too.
	raw := nc
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if cfg.TLS != nil {
		tc := cfg.TLS
		if tc.ServerName == "" {
			tc = tc.Clone()
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			} else {
				tc.ServerName = addr
			}
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		nc = tlsConn
	}

	c := &Conn{
		addr:     addr,
		onDone:   cfg.OnRequestDone,
		nc:       nc,
		br:       bufio.NewReaderSize(nc, 64<<10),
		maxFrame: cfg.MaxFrameSize,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		pend:     make(map[int32]*pending),
	}
	if c.maxFrame <= 0 {
		c.maxFrame = DefaultMaxFrameSize
	}
	if cfg.ClientID != "" {
		id := cfg.ClientID
		c.clientID = &id
	}
	c.timer = time.AfterFunc(time.Hour, c.expire)
	c.timer.Stop()

	if err := c.negotiate(cfg.MaxVersions); err != nil {
		return nil, err
	}
	if cfg.SASL != nil {
		if err := c.authenticate(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if !stop() {
		return nil, ctx.Err() // ctx ended just now; the deadline is in the past
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// roundTrip writes req at its current version and reads its response,
// synchronously; only the handshake uses it, before the loops start.
func (c *Conn) roundTrip(req kmsg.Request) (kmsg.Response, []byte, error) {
	id := c.nextID.Add(1) & 0x7fffffff
	if _, err := c.nc.Write(AppendRequest(nil, req, id, c.clientID)); err != nil {
		return nil, nil, err
	}
	frame, err := ReadFrame(c.br, nil, c.maxFrame)
	if err != nil {
		return nil, nil, err
	}
	resp, err := parseResponseAt(frame, req.Key(), req.GetVersion(), id)
	return resp, frame, err
}

// negotiate runs ApiVersions and fills c.versions.
func (c *Conn) negotiate(caps map[int16]int16) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = apiVersionsVersion
	req.ClientSoftwareName = clientSoftwareName
	req.ClientSoftwareVersion = clientSoftwareVersion()
	var resp *kmsg.ApiVersionsResponse
	for attempt := 0; ; attempt++ {
		start := time.Now()
		r, frame, err := c.roundTrip(req)
		c.handshakeRTT = time.Since(start)
		// A broker that does not know our version answers with a v0 body
		// whose error code is UNSUPPORTED_VERSION (both layouts start with
		// the error code), which may not decode at our version.
		if len(frame) >= 6 && int16(binary.BigEndian.Uint16(frame[4:])) == kerr.UnsupportedVersion.Code && attempt == 0 && req.Version > 0 {
			v0 := kmsg.NewPtrApiVersionsResponse()
			v0.Version = 0
			next := int16(0)
			if v0.ReadFrom(frame[4:]) == nil {
				for _, k := range v0.ApiKeys {
					if k.ApiKey == req.Key() && k.MaxVersion < req.Version {
						next = max(k.MaxVersion, 0)
					}
				}
			}
			req.Version = next
			continue
		}
		if err != nil {
			return fmt.Errorf("api versions: %w", err)
		}
		resp = r.(*kmsg.ApiVersionsResponse)
		break
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("api versions: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	c.versions = make(map[int16]int16, len(resp.ApiKeys))
	c.minVersions = make(map[int16]int16, len(resp.ApiKeys))
	c.featuresEpoch = -1
	if resp.Version >= 3 {
		c.featuresEpoch = resp.FinalizedFeaturesEpoch
		for _, f := range resp.FinalizedFeatures {
			if c.features == nil {
				c.features = make(map[string]int16, len(resp.FinalizedFeatures))
			}
			c.features[f.Name] = f.MaxVersionLevel
		}
	}
	for _, k := range resp.ApiKeys {
		ours := maxVersion(k.ApiKey)
		if ours < 0 {
			continue // a key kmsg does not know: we could not encode it
		}
		v := min(ours, k.MaxVersion)
		if capV, ok := caps[k.ApiKey]; ok {
			v = min(v, capV)
		}
		if v < k.MinVersion || v < 0 {
			continue
		}
		c.versions[k.ApiKey] = v
		c.minVersions[k.ApiKey] = k.MinVersion
	}
	return nil
}

// authenticate runs SaslHandshake v1 and the SaslAuthenticate exchange.
func (c *Conn) authenticate(ctx context.Context, cfg DialConfig) error {
	mech := cfg.SASL
	hv, ok := c.Version(17)
	av, ok2 := c.Version(36)
	if !ok || !ok2 || hv < 1 {
		return errors.New("sasl: broker lacks SaslHandshake v1 / SaslAuthenticate")
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = min(hv, 1)
	hs.Mechanism = mech.Name()
	r, _, err := c.roundTrip(hs)
	if err != nil {
		return fmt.Errorf("sasl handshake: %w", err)
	}
	if hr := r.(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		return fmt.Errorf("sasl handshake %s (broker offers %v): %w", mech.Name(), hr.SupportedMechanisms, kerr.ErrorForCode(hr.ErrorCode))
	}
	// franz-go's sasl.Mechanism takes the broker's host:port (kgo passes
	// its address); AWS_MSK_IAM signs the host and fails without a port.
	session, out, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("sasl %s: %w", mech.Name(), err)
	}
	for step := 0; ; step++ {
		if step > 16 {
			return fmt.Errorf("sasl %s: too many steps", mech.Name())
		}
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version = av
		ar.SASLAuthBytes = out
		// The session lifetime counts from before our last message: the
		// broker starts it when it has read that message, later.
		sent := time.Now()
		r, _, err := c.roundTrip(ar)
		if err != nil {
			return fmt.Errorf("sasl authenticate: %w", err)
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("sasl %s: %w%s", mech.Name(), kerr.ErrorForCode(resp.ErrorCode), msg)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("sasl %s: %w", mech.Name(), err)
		}
		if done {
			// KIP-368: SaslAuthenticate v1+ says how long the session
			// lasts (connections.max.reauth.ms, or the credential's own
			// expiry if sooner); 0 means no limit.
			if ms := resp.SessionLifetimeMillis; ar.Version >= 1 && ms > 0 {
				c.setSession(sent, time.Duration(ms)*time.Millisecond)
			}
			return nil
		}
		out = next
	}
}

// setSession records a SASL session of lifetime life that started at
// start, and picks when to renew it: at a uniformly random 85 to 95 % of
// the lifetime, as the Java client does, so a fleet of producers started
// together does not renew at one instant, and some time is left to let
// requests in flight finish first.
func (c *Conn) setSession(start time.Time, life time.Duration) {
	c.sessionEnd = start.Add(life)
	frac := 0.85 + 0.10*rand.Float64()
	c.renewAt = start.Add(time.Duration(float64(life) * frac))
}
