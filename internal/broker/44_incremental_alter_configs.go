package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
// * Topic resources: SET or DELETE producer.state.batches.to.retain
//   (DELETE restores the server default). Values below 5 are
//   INVALID_CONFIG. Shrinking drops the oldest retained batches at once.
// * Broker resources ("" or a node id; applied cluster-wide): SET or
//   DELETE log.producer.state.batches.to.retain and
//   producer.id.expiration.ms.
// * Each resource is validated whole before anything changes; ValidateOnly
//   only validates.
//
// Simplifications: APPEND and SUBTRACT and other config names are
// INVALID_CONFIG; per-node broker configs are cluster-wide.

func init() { regKey(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, qr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = qr.ResourceType, qr.ResourceName
		code, msg := c.alterResource(qr, req.ValidateOnly)
		if code != 0 {
			sr.ErrorCode = code
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// alterResource validates then applies one resource's changes. c.mu is
// held.
func (c *Cluster) alterResource(qr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	invalid := func(err error) (int16, string) { return kerr.InvalidConfig.Code, err.Error() }
	switch qr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		t := c.topics[qr.ResourceName]
		if t == nil {
			return kerr.UnknownTopicOrPartition.Code, "unknown topic"
		}
		window := t.window
		for _, cfg := range qr.Configs {
			if cfg.Name != propWindow {
				return invalid(&ConfigError{cfg.Name, "", "only " + propWindow + " can be altered"})
			}
			switch cfg.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				n, err := parseWindow(propWindow, cfg.Value)
				if err != nil {
					return invalid(err)
				}
				window = n
			case kmsg.IncrementalAlterConfigOpDelete:
				window = 0
			default:
				return invalid(&ConfigError{cfg.Name, cfg.Op.String(), "only SET and DELETE are supported"})
			}
		}
		if !validateOnly {
			_ = c.setWindow(t.name, window)
		}
		return 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if !c.validBrokerName(qr.ResourceName) {
			return kerr.InvalidRequest.Code, "unknown broker"
		}
		window, exp := c.defaultWindow, c.expiration
		for _, cfg := range qr.Configs {
			del := cfg.Op == kmsg.IncrementalAlterConfigOpDelete
			if !del && cfg.Op != kmsg.IncrementalAlterConfigOpSet {
				return invalid(&ConfigError{cfg.Name, cfg.Op.String(), "only SET and DELETE are supported"})
			}
			var err error
			switch cfg.Name {
			case propBrokerWindow:
				window = DefaultWindow
				if !del {
					window, err = parseWindow(propBrokerWindow, cfg.Value)
				}
			case propExpiration:
				exp = DefaultProducerIDExpiration
				if !del {
					exp, err = parseExpiration(cfg.Value)
				}
			default:
				err = &ConfigError{cfg.Name, "", "only " + propBrokerWindow + " and " + propExpiration + " can be altered"}
			}
			if err != nil {
				return invalid(err)
			}
		}
		if !validateOnly {
			c.defaultWindow, c.expiration = window, exp
			for _, t := range c.topics {
				c.trimTopic(t)
			}
		}
		return 0, ""
	}
	return kerr.InvalidRequest.Code, "unsupported resource type"
}
