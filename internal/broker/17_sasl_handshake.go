package broker

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v1
//
// Behavior:
// * Only with [Config.SASL]; without it every mechanism is
//   UNSUPPORTED_SASL_MECHANISM (a PLAINTEXT listener).
// * Picks the mechanism for the SaslAuthenticate exchange that follows;
//   one not in SASLConfig.Mechanisms is UNSUPPORTED_SASL_MECHANISM, with
//   the list.
// * On an authenticated connection it starts a re-authentication
//   (KIP-368): until it succeeds, requests other than SaslAuthenticate and
//   ApiVersions close the connection.
//
// Simplifications: v0 (raw SASL tokens after the handshake) is not served.

func init() { regKey(17, 1, 1, handleSaslHandshake) }

func handleSaslHandshake(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	sc := c.cfg.SASL
	if sc == nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, nil
	}
	resp.SupportedMechanisms = slices.Clone(sc.Mechanisms)
	if !slices.Contains(sc.Mechanisms, req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, nil
	}
	if r.cc.saslMech != "" && !r.cc.authed {
		return nil, fmt.Errorf("%w: second SaslHandshake before SaslAuthenticate", errConnClose)
	}
	r.cc.saslMech = req.Mechanism
	r.cc.authed = false
	return resp, nil
}
