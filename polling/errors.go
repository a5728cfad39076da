package polling

import (
	"errors"
	"fmt"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// errNoIterator is returned when GetShardIterator answers without an iterator.
var errNoIterator = errors.New("the service returned no shard iterator")

// Error is an error that ended the reading of a shard.
type Error struct {
	Stream string // stream ARN
	Shard  string
	Op     string // the Kinesis operation that failed
	Err    error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("polling shard %s of stream %s: %s: %v", e.Shard, e.Stream, e.Op, e.Err)
	if hint := awserr.Decide(e.Op, e.Err).Hint; hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }
