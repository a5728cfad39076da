package read

import (
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
	// started is set once the fallback has seen its first record.
	started bool
	// present is set when that first record lies at or before from: the
	// refused start's record is still there, so the refusal had another
	// cause than the retention period, and nothing is kept.
	present bool
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
// then the refused start's record itself was trimmed. A first record at or
// before it sets present and keeps nothing: the start's record was not
// trimmed, and Kinesis refused the start for another reason (a position of
// another shard, or beyond every record of this one), which a read from
// TRIM_HORIZON must not paper over by skipping up to it.
func (f *trimFallback) filter(recs []types.Record) (kept []types.Record, expired bool) {
	if len(recs) == 0 || f.present {
		return recs[:0], false
	}
	if !f.started {
		f.started = true
		expired = shard.CompareSequence(aws.ToString(recs[0].SequenceNumber), f.from.Sequence) > 0
		if !expired {
			f.present = true
			return recs[:0], false
		}
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
