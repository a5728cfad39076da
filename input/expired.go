package input

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// trimFallback reads a shard from TRIM_HORIZON in place of a start at or after
// a sequence number that Kinesis refused (InvalidArgumentException). Kinesis
// answers so when the sequence number's record has passed the stream's
// retention period and was trimmed, but the refusal may have another cause, so
// the fallback drops every record the refused start would not have read: it
// can neither repeat a record nor skip one that still exists.
type trimFallback struct {
	from shard.Start // the refused start: AtSequence or AfterSequence
	// seen is set once the fallback has seen its first record.
	seen bool
}

// isSequenceStart reports whether a start names a sequence number, the only
// kind a trimFallback replaces.
func isSequenceStart(s shard.Start) bool {
	return s.Kind == shard.AtSequence || s.Kind == shard.AfterSequence
}

// filter returns the records of a read from TRIM_HORIZON that the refused
// start would have read: those after its sequence number (AfterSequence), or
// from it on (AtSequence, which resumes inside a KPL aggregate whose user
// records the converter then skips itself). expired reports, for the first
// record the fallback ever sees, whether it lies after that sequence number:
// then the refused start's record itself was trimmed.
func (f *trimFallback) filter(recs []types.Record) (kept []types.Record, expired bool) {
	if len(recs) == 0 {
		return recs, false
	}
	if !f.seen {
		f.seen = true
		expired = shard.CompareSequence(aws.ToString(recs[0].SequenceNumber), f.from.Sequence) > 0
	}
	i := 0
	for i < len(recs) {
		c := shard.CompareSequence(aws.ToString(recs[i].SequenceNumber), f.from.Sequence)
		if c > 0 || (c == 0 && f.from.Kind == shard.AtSequence) {
			break
		}
		i++
	}
	return recs[i:], expired
}

// errRecreated: the shard listed under a reader's shard id is another one.
var errRecreated = errors.New("the stream was deleted and created again")

// sameShard checks, before a refused start falls back to TRIM_HORIZON, that
// the shard listed now is the one the start's sequence number belongs to. A
// stream deleted and created again under its name has shards of the same ids:
// a reader of the old one, refused there, must not read the new one (its
// records would come again once discovery restarts the stream's readers).
//
// It answers nil when the shard is the same, an error wrapping errRecreated
// when it is not, and another error when it cannot tell (the stream is
// deleted, not listed, or the listing failed).
func (r *shardReader) sameShard(ctx context.Context, from shard.Start) error {
	listed, err := listShards(ctx, r.s.client, r.s.arn)
	if err != nil {
		return fmt.Errorf("cannot tell whether the shard is still the same: %w", err)
	}
	for _, sh := range listed {
		if sh.id != r.info.id {
			continue
		}
		known := r.info.startSeq
		if known == "" {
			known = r.cp.ShardStart
		}
		if known != "" && sh.startSeq != "" && known != sh.startSeq {
			return fmt.Errorf("the shard now starts at sequence number %s, not %s: %w", sh.startSeq, known, errRecreated)
		}
		if isSequenceStart(from) && sh.startSeq != "" && shard.CompareSequence(from.Sequence, sh.startSeq) < 0 {
			return fmt.Errorf("sequence number %s is older than the shard, which starts at %s: %w", from.Sequence, sh.startSeq, errRecreated)
		}
		return nil
	}
	return errors.New("the shard is no longer listed")
}
