package broker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate: v0-2
//
// Behavior:
// * Passes the client's message to SASLConfig.Authenticate for the
//   mechanism SaslHandshake chose; its error is SASL_AUTHENTICATION_FAILED
//   with the error's text as ErrorMessage, its reply goes back as
//   SASLAuthBytes and the connection is authenticated.
// * v1+ announces SASLConfig.SessionLifetime as SessionLifetimeMs
//   (KIP-368, connections.max.reauth.ms). The session ends that long after
//   this request was read; a request read later, other than a
//   SaslHandshake starting a re-authentication, closes the connection
//   without being handled, as Kafka does ([Cluster.SessionsExpired] counts
//   them).
//
// Simplifications: one message per exchange (PLAIN, OAUTHBEARER,
// AWS_MSK_IAM; not SCRAM); the connection stays open after a failure (Kafka
// closes it; clients close it themselves).

func init() { regKey(36, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	sc := c.cfg.SASL
	if sc == nil || r.cc.saslMech == "" || r.cc.authed {
		return nil, fmt.Errorf("%w: SaslAuthenticate without SaslHandshake", errConnClose)
	}
	reply, err := sc.Authenticate(r.cc.saslMech, req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		r.cc.saslMech = ""
		return resp, nil
	}
	resp.SASLAuthBytes = reply
	r.cc.authed = true
	r.cc.sessionEnd = time.Time{}
	if sc.SessionLifetime > 0 && req.Version >= 1 {
		resp.SessionLifetimeMillis = sc.SessionLifetime.Milliseconds()
		r.cc.sessionEnd = r.readAt.Add(sc.SessionLifetime)
	}
	return resp, nil
}

// checkSASL decides whether a request of key read at readAt may be
// handled on cc under [Config.SASL], returning an error wrapping
// errConnClose if the connection must close instead. It runs on cc's
// reader goroutine, which alone touches cc's SASL state.
func (cc *conn) checkSASL(key int16, readAt time.Time) error {
	c := cc.n.c
	if c.cfg.SASL == nil || key == 18 {
		return nil
	}
	if !cc.authed {
		if key == 17 || key == 36 {
			return nil
		}
		return fmt.Errorf("%w: api key %d before SASL authentication", errConnClose, key)
	}
	if key != 17 && !cc.sessionEnd.IsZero() && !readAt.Before(cc.sessionEnd) {
		c.mu.Lock()
		c.sessionsExpired++
		c.mu.Unlock()
		return fmt.Errorf("%w: api key %d after the SASL session expired", errConnClose, key)
	}
	return nil
}

// SessionsExpired returns how many connections were closed because a
// request arrived after their SASL session ended ([SASLConfig]
// SessionLifetime): each is a request the client sent too late, which
// the broker did not handle.
func (c *Cluster) SessionsExpired() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionsExpired
}
