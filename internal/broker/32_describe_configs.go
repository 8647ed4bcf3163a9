package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behavior:
// * Topic resources show producer.state.batches.to.retain (source
//   DYNAMIC_TOPIC_CONFIG when set on the topic) and max.message.bytes.
// * Broker resources (any node id, or "" for the cluster default) show
//   log.producer.state.batches.to.retain and producer.id.expiration.ms.
// * ConfigNames filters (null = all); Documentation at v3+ if asked.
//
// Simplifications: no synonyms, no other configs, brokers share one set.

func init() { regKey(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, qr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = qr.ResourceType, qr.ResourceName
		var cvs []configValue
		switch qr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := c.topics[qr.ResourceName]
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			cvs = c.topicConfigs(t)
		case kmsg.ConfigResourceTypeBroker:
			if !c.validBrokerName(qr.ResourceName) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			cvs = c.brokerConfigs()
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		if sr.ErrorCode != 0 {
			msg := kerr.ErrorForCode(sr.ErrorCode).Error()
			sr.ErrorMessage = &msg
		}
		for _, cv := range cvs {
			if qr.ConfigNames != nil && !contains(qr.ConfigNames, cv.name) {
				continue
			}
			rc := kmsg.NewDescribeConfigsResponseResourceConfig()
			rc.Name = cv.name
			v := cv.value
			rc.Value = &v
			rc.Source = cv.source
			rc.IsDefault = cv.source == kmsg.ConfigSourceDefaultConfig
			rc.ConfigType = cv.typ
			if req.IncludeDocumentation {
				d := cv.doc
				rc.Documentation = &d
			}
			sr.Configs = append(sr.Configs, rc)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// validBrokerName reports whether name is "" (cluster default) or one of
// our node ids.
func (c *Cluster) validBrokerName(name string) bool {
	if name == "" {
		return true
	}
	id, err := strconv.Atoi(name)
	return err == nil && id >= 0 && id < len(c.nodes)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
