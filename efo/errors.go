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
	hint := awserr.Decide("SubscribeToShard", e.Err).Hint
	if errors.Is(e.Err, ErrConsumerRegistered) {
		// The consumer was found registered: what is gone is the shard.
		hint = "the shard is older than the stream's retention period, or the stream is being deleted"
	}
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }
