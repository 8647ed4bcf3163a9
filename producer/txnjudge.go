package producer

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// txnAPI names a transactional request for judgeTxn.
type txnAPI uint8

const (
	txnAPIFindCoordinator txnAPI = iota
	txnAPIInitProducerID
	txnAPIAddPartitions
	txnAPIAddOffsets
	txnAPITxnOffsetCommit
	txnAPIEndTxn
	txnAPIProduce // a record's answer (only named in errors)
)

var txnAPINames = [...]string{"FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn", "Produce"}

func (a txnAPI) String() string {
	if int(a) < len(txnAPINames) {
		return txnAPINames[a]
	}
	return "txnAPI(?)"
}

// txnVerdict is what an error code in a transactional answer means.
type txnVerdict uint8

const (
	txnvOK txnVerdict = iota
	// txnvRetry: send the same request again after a backoff.
	txnvRetry
	// txnvRefind: find the coordinator again, then retry.
	txnvRefind
	// txnvSkip: the partition was not tried because another one failed
	// (OPERATION_NOT_ATTEMPTED); its fate follows the others'.
	txnvSkip
	// txnvAbortable: the transaction can only be aborted; the next may
	// begin afterwards.
	txnvAbortable
	// txnvFenced: another producer took the transactional id (or the
	// coordinator fenced our epoch): the producer can only be closed.
	txnvFenced
	// txnvFatal: the producer can only be closed.
	txnvFatal
)

var txnVerdictNames = [...]string{"ok", "retry", "refind coordinator", "skip", "abortable", "fenced", "fatal"}

func (v txnVerdict) String() string {
	if int(v) < len(txnVerdictNames) {
		return txnVerdictNames[v]
	}
	return "txnVerdict(?)"
}

// judgeTxn classifies code in an answer to api, as the Java client's
// TransactionManager handlers do (KIP-1050's classes). aborting is true
// for EndTxn(abort): TRANSACTION_ABORTABLE there would loop, so it is
// fatal. canBump is true when the coordinator can bump the epoch
// (InitProducerId v3+ or transaction version 2): UNKNOWN_PRODUCER_ID is
// then abortable (the abort bumps the epoch), else fatal.
func judgeTxn(api txnAPI, code int16, aborting, canBump bool) txnVerdict {
	switch code {
	case 0:
		return txnvOK
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		return txnvRefind
	case kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
		return txnvRetry
	case kerr.RequestTimedOut.Code:
		// The group coordinator answers it for a commit it could not
		// write in time (Java refinds the coordinator).
		if api == txnAPITxnOffsetCommit {
			return txnvRefind
		}
	case kerr.UnknownTopicOrPartition.Code:
		// Metadata may be behind a topic just created.
		if api == txnAPIAddPartitions || api == txnAPITxnOffsetCommit {
			return txnvRetry
		}
	case kerr.OperationNotAttempted.Code:
		if api == txnAPIAddPartitions {
			return txnvSkip
		}
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		// On the coordinator's requests INVALID_PRODUCER_EPOCH (before
		// KIP-588) means fenced, as PRODUCER_FENCED does.
		return txnvFenced
	case kerr.TransactionalIDAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code:
		return txnvFatal
	case kerr.TopicAuthorizationFailed.Code:
		if api == txnAPIAddPartitions {
			return txnvAbortable
		}
	case kerr.GroupAuthorizationFailed.Code:
		if api == txnAPIFindCoordinator || api == txnAPIAddOffsets || api == txnAPITxnOffsetCommit {
			return txnvAbortable
		}
	case kerr.FencedInstanceID.Code, kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code:
		// KIP-447: the consumer lost its membership; its offsets must
		// not be committed, but this producer is not fenced.
		if api == txnAPITxnOffsetCommit {
			return txnvAbortable
		}
	case kerr.TransactionAbortable.Code:
		if aborting {
			return txnvFatal
		}
		return txnvAbortable
	case kerr.UnknownProducerID.Code:
		if api == txnAPIInitProducerID || api == txnAPIFindCoordinator {
			return txnvFatal
		}
		if canBump {
			return txnvAbortable
		}
		return txnvFatal
	}
	// INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT,
	// UNSUPPORTED_VERSION and codes no handler expects.
	return txnvFatal
}
