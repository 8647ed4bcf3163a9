package broker

import "github.com/twmb/franz-go/pkg/kerr"

// The fault vocabulary shared by the randomized tests (producer's mixed-fault
// test and internal/soak), so both draw from one list.

// ProduceErrorCodes are the error codes a ProduceResponse partition can
// carry (Kafka's ProduceResponse.json and ReplicaManager, per franz-go's
// kerr), non-retriable ones included. Tests script them with [Refuse]:
// answered without appending.
var ProduceErrorCodes = []*kerr.Error{
	kerr.UnknownServerError, kerr.CorruptMessage, kerr.UnknownTopicOrPartition, kerr.LeaderNotAvailable,
	kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.NetworkException, kerr.MessageTooLarge,
	kerr.InvalidTopicException, kerr.RecordListTooLarge, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend,
	kerr.InvalidRequiredAcks, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.InvalidTimestamp,
	kerr.UnsupportedForMessageFormat, kerr.OutOfOrderSequenceNumber, kerr.InvalidProducerEpoch,
	kerr.InvalidTxnState, kerr.TransactionalIDAuthorizationFailed, kerr.KafkaStorageError, kerr.UnknownProducerID,
	kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.InvalidRecord, kerr.ProducerFenced, kerr.UnknownTopicID,
	kerr.ThrottlingQuotaExceeded, kerr.UnsupportedVersion,
}

// AfterAppendCodes are what Kafka can answer for a batch it appended and
// then could not confirm (acks=all waiting for the ISR: leadership lost,
// timeout, ISR shrunk), and DUPLICATE_SEQUENCE_NUMBER, which older brokers
// answer for a batch already in the log. Tests script them with
// [AppendThenFail].
var AfterAppendCodes = []*kerr.Error{
	kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend, kerr.DuplicateSequenceNumber,
}

// CoordinatorErrorCodes are the retriable errors a transaction or group
// coordinator answers while it moves or loads its partition. Tests arm them
// with [Cluster.InjectCoordinatorError].
var CoordinatorErrorCodes = []*kerr.Error{
	kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress,
}
