package awserr

import "strings"

// Decision is what a reader does about a failed call: how to retry, whether
// the failure counts toward its retry limit, and what a user must fix when
// retrying cannot help. Decide is the one place that decides it.
type Decision struct {
	// Class says how to go on: Recoverable, Throttled and Retryable errors
	// are retried with backoff, Fatal ones end the read, Canceled means the
	// caller's context ended.
	Class Class
	// Counts is set when the failure counts toward the reader's limit of
	// failures in a row: retryable errors, and throttling of
	// SubscribeToShard, which allows one call per second per shard and
	// consumer, so that hitting it again and again means another process
	// subscribes to the shard with the same consumer.
	Counts bool
	// Hint names what to fix (an IAM action, a KMS key, another process),
	// or is empty.
	Hint string
}

// Decide decides about err, returned by the Kinesis operation op (e.g.
// "GetRecords").
func Decide(op string, err error) Decision {
	if NoCredentials(err) {
		return Decision{Class: Fatal, Hint: NoCredentialsHint}
	}
	d := Decision{Class: Classify(err)}
	d.Counts = d.Class == Retryable || (d.Class == Throttled && op == "SubscribeToShard")
	d.Hint = hint(op, Code(err))
	return d
}

// permissions are what each operation needs, for access denied errors.
var permissions = map[string]string{
	"SubscribeToShard":         "kinesis:SubscribeToShard on the consumer",
	"GetShardIterator":         "kinesis:GetShardIterator and kinesis:GetRecords on this stream",
	"GetRecords":               "kinesis:GetShardIterator and kinesis:GetRecords on this stream",
	"ListShards":               "kinesis:ListShards on this stream",
	"DescribeStreamSummary":    "kinesis:DescribeStreamSummary, kinesis:ListShards, kinesis:GetShardIterator and kinesis:GetRecords on it",
	"DescribeStreamConsumer":   "kinesis:DescribeStreamConsumer and, for registration: lazy, kinesis:RegisterStreamConsumer",
	"RegisterStreamConsumer":   "kinesis:DescribeStreamConsumer and, for registration: lazy, kinesis:RegisterStreamConsumer",
	"DeregisterStreamConsumer": "kinesis:DeregisterStreamConsumer on the consumer",
}

func hint(op, code string) string {
	switch {
	case code == "AccessDeniedException" || code == "AccessDenied":
		if p, ok := permissions[op]; ok {
			return "the credentials need " + p
		}
		return "the credentials need kinesis:" + op
	case strings.HasPrefix(code, "KMS") && code != "KMSThrottlingException":
		return "the stream is encrypted: the credentials need kms:Decrypt on its key, and the key must be enabled"
	case code == "ResourceNotFoundException":
		switch op {
		case "GetShardIterator", "GetRecords":
			return "the stream was deleted, or the shard is older than the stream's retention period"
		case "SubscribeToShard":
			return "the consumer or the stream no longer exists: was the consumer deregistered?"
		}
	case code == "LimitExceededException" && op == "SubscribeToShard":
		return "kept hitting the SubscribeToShard limit of 1 call per second per shard and consumer: is another process subscribing with this consumer?"
	}
	return ""
}

// NoCredentialsHint says how to give credentials when the SDK found none.
const NoCredentialsHint = "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (a profile of the shared config), or the credentials fields (id and secret, profile, role), or run where an instance, container or pod role applies; a local emulator takes any static credentials, e.g. id: local, secret: local"

// NoCredentials reports whether err is the SDK failing to find credentials
// (every provider of its chain tried, the last one usually the instance
// metadata service), before any call reached AWS.
func NoCredentials(err error) bool {
	return err != nil && strings.Contains(err.Error(), "get credentials: ")
}
