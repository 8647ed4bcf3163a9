package producer

import "github.com/twmb/franz-go/pkg/kerr"

// The Metadata error matrix, as judge is the Produce one: what a topic or
// partition entry's error code means for the records that wait for it.
// applyMetadata only applies the verdict. DESIGN.md ("Metadata answers")
// gives each row's reason from Kafka's broker and the Java client.

// metaAct is what one entry of a Metadata answer asks of the producer.
type metaAct uint8

const (
	// metaTake: the entry is usable; its partitions and leaders are taken.
	metaTake metaAct = iota
	// metaWait: records wait for the topic (up to max.block.ms) and the
	// topic is asked for again after the metadata backoff, which grows
	// while answers keep saying so.
	metaWait
	// metaFail: no retry can change the answer; records waiting for the
	// topic fail at once with ErrTopicMetadata wrapping the code.
	metaFail
)

func (a metaAct) String() string {
	switch a {
	case metaTake:
		return "take"
	case metaWait:
		return "wait"
	case metaFail:
		return "fail"
	}
	return "metaAct(?)"
}

// topicCodes lists every code a Metadata topic entry can carry. Whether
// the request asked for auto-creation changes why a code comes (a topic
// missing, or one whose creation is under way or was refused), not the
// verdict: no code means "final" in one case and "wait" in the other.
var topicCodes = map[int16]metaAct{
	0: metaTake,
	// The name breaks Kafka's rules ([a-zA-Z0-9._-], 1 to 249 characters,
	// not "." or ".."): no broker will ever have such a topic.
	kerr.InvalidTopicException.Code: metaFail,
	// No DESCRIBE (or, with auto-creation, no CREATE) on the topic:
	// asking again does not grant it.
	kerr.TopicAuthorizationFailed.Code: metaFail,
	// Not there: an admin may be creating it, and a broker learns a new
	// topic a moment after the controller; with auto-creation, Kafka 4
	// answers this while the creation is in flight and also after the
	// controller refused it, which the answer cannot tell apart.
	kerr.UnknownTopicOrPartition.Code: metaWait,
	// Created, leaders not elected yet (ZooKeeper-mode auto-creation).
	kerr.LeaderNotAvailable.Code: metaWait,
	// Only requests by topic id get it; the producer asks by name.
	kerr.UnknownTopicID.Code: metaWait,
	// ZooKeeper-mode brokers (Kafka before 4) put the controller's
	// CreateTopics error in the Metadata answer of an auto-creation.
	// Fewer live brokers than default.replication.factor: a broker
	// coming back (a rolling restart) makes the next creation succeed.
	kerr.InvalidReplicationFactor.Code: metaWait,
	// The broker's num.partitions, a create.topic.policy.class.name
	// policy, or the topic configs the broker adds refuse the topic; the
	// next attempt sends the same request.
	kerr.InvalidPartitions.Code: metaFail,
	kerr.PolicyViolation.Code:   metaFail,
	kerr.InvalidConfig.Code:     metaFail,
	// Transient refusals of a creation: the controller mutation quota,
	// a creation racing another (taken for LEADER_NOT_AVAILABLE by
	// Kafka), a controller moving or slow.
	kerr.ThrottlingQuotaExceeded.Code: metaWait,
	kerr.TopicAlreadyExists.Code:      metaWait,
	kerr.NotController.Code:           metaWait,
	kerr.RequestTimedOut.Code:         metaWait,
}

// topicVerdict judges a topic entry's error code. A code the table does
// not list (a newer broker's, or a bug) waits: failing records on a code
// nothing says is final would be worse than max.block.ms.
func topicVerdict(code int16) metaAct {
	if v, ok := topicCodes[code]; ok {
		return v
	}
	return metaWait
}

// partitionUsable judges a partition entry's error code in a topic entry
// without error: true when the entry's leader is good to use as it is.
// REPLICA_NOT_AVAILABLE only says a follower is down. Every other code
// (LEADER_NOT_AVAILABLE, LISTENER_NOT_FOUND: Kafka then names no leader)
// asks for the partition again after the backoff. Partition codes never
// fail records: they concern one partition, and what waits in it expires
// at delivery.timeout.ms.
func partitionUsable(code int16) bool {
	return code == 0 || code == kerr.ReplicaNotAvailable.Code
}
