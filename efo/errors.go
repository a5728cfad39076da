package efo

import (
	"errors"
	"fmt"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// Error is an error that ended the reading of a shard by fan-out.
type Error struct {
	Consumer string // consumer ARN
	Shard    string
	Class    awserr.Class
	Err      error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("fan-out subscription of consumer %s to shard %s: %v", e.Consumer, e.Shard, e.Err)
	switch awserr.Code(e.Err) {
	case "AccessDeniedException":
		msg += " (the credentials need kinesis:SubscribeToShard on the consumer)"
	case "ResourceNotFoundException":
		if errors.Is(e.Err, ErrConsumerRegistered) {
			msg += " (the shard is older than the stream's retention period, or the stream is being deleted)"
		} else {
			msg += " (the consumer or the stream no longer exists: was the consumer deregistered?)"
		}
	case "LimitExceededException":
		msg += " (kept hitting the SubscribeToShard limit of 1 call per second per shard and consumer: is another process subscribing with this consumer?)"
	case "KMSAccessDeniedException", "KMSDisabledException", "KMSInvalidStateException", "KMSNotFoundException":
		msg += " (the stream is encrypted: the credentials need kms:Decrypt on its key, and the key must be enabled)"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }
