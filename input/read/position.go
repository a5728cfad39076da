package read

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// A position the shard cannot hold is never answered by skipping: a
// sequence number above every record of the shard would skip all of them,
// present and future. Three kinds of wrong position are told apart:
//
//   - out of the shard's range (below its starting sequence number, or above
//     the ending one of a closed shard): provably wrong, the shard stops
//     until the position is set again;
//   - refused by Kinesis while a record at or after it is still in the shard
//     (a read from TRIM_HORIZON shows it): not the retention case; the shard
//     stops, and the position is tried again now and then, read from only
//     once Kinesis takes it;
//   - refused because its record was trimmed: the first record left lies
//     after it, and reading goes on from there (trimFallback).

// errPositionRefused is returned by a read from TRIM_HORIZON in place of a
// refused start when its first record lies at or before that start: the
// start's record is still there, so Kinesis refused it for another reason
// than the retention period.
var errPositionRefused = errors.New("refused by Kinesis, though records at or before it are still in the shard: it is no checkpoint older than the retention period")

// A refused position is tried again after positionRetryFirst, then after
// pauses doubling up to positionRetry: each try is an error in the log.
const (
	positionRetryFirst = 5 * time.Second
	positionRetry      = 5 * time.Minute
)

// outOfRange reports a sequence start that lies outside the shard sh as
// listed: below its starting sequence number, or above the ending one of a
// closed shard. Other starts, and shards not listed, are never out of range.
func outOfRange(start shard.Start, sh shardInfo) error {
	if !isSequenceStart(start) || sh.startSeq == "" {
		return nil
	}
	if shard.CompareSequence(start.Sequence, sh.startSeq) < 0 {
		return fmt.Errorf("sequence number %s is below the shard's first, %s: it is of another shard, or of the stream before it was deleted and created again", start.Sequence, sh.startSeq)
	}
	if coord.KnownEnd(sh.startSeq, sh.endSeq) && shard.CompareSequence(start.Sequence, sh.endSeq) > 0 {
		return fmt.Errorf("sequence number %s is above the shard's last, %s (the shard is closed; its sequence numbers run from %s to %s)", start.Sequence, sh.endSeq, sh.startSeq, sh.endSeq)
	}
	return nil
}

// positionFix says where a shard's position is kept and the command that
// sets it.
func (r *shardReader) positionFix() string {
	st := r.s.env.Store
	return fmt.Sprintf("its checkpoint is kept in the %s; to read the shard again, %s", st.Where, st.SetCommand(r.s.conf.ARN, r.info.id))
}

// stopOnPosition keeps the shard unread after its position proved out of
// its range, until ctx ends.
func (r *shardReader) stopOnPosition(ctx context.Context, start shard.Start, cause error) {
	r.stayStopped(ctx, fmt.Sprintf("the position %v is not a position of this shard: %v. The shard is not read, so that no record is skipped: %s",
		start, cause, r.positionFix()))
}

// positionRefused reports a start Kinesis refused for another reason than
// the retention period; it is tried again after wait.
func (r *shardReader) positionRefused(start shard.Start, cause error, wait time.Duration) {
	r.setStopped(true)
	r.log.Errorf("reading from %v: %s. The shard is not read, so that no record is skipped; the position is tried again in %v: %s", start, strings.TrimSuffix(cause.Error(), "."), wait.Round(time.Second), r.positionFix())
}

// checkSequences refuses a read with a record whose sequence number is not
// one: delivered, its checkpoint would be refused at the next start.
func checkSequences(recs []types.Record) error {
	for i := range recs {
		if seq := aws.ToString(recs[i].SequenceNumber); !shard.ValidSequence(seq) {
			if len(seq) > 64 {
				seq = fmt.Sprintf("%s... (%d characters)", seq[:64], len(seq))
			}
			return fmt.Errorf("record %d of %d of a read has the sequence number %q, not a Kinesis sequence number (1 to %d decimal digits, no leading zero): the read is not taken", i+1, len(recs), seq, shard.MaxSequenceDigits)
		}
	}
	return nil
}

// errEndUnconfirmed: a read reported the shard's end, and ListShards does not
// list the shard closed.
var errEndUnconfirmed = errors.New("a read reported the shard's end, which ListShards does not confirm")

// confirmEnd checks a shard's end reported by a read: the end of an open
// shard would commit it as ended and lose its records for good. An end that
// names the shard's children (ChildShards) is the service's word twice over;
// one that does not is taken only when ListShards agrees (closed, or gone
// past the retention period, which only closed shards do).
func (r *shardReader) confirmEnd(ctx context.Context, b shard.Batch) error {
	if len(b.ChildShards) > 0 {
		return nil
	}
	listed, err := listShards(ctx, r.s.conf.Client, r.s.conf.ARN)
	if err != nil {
		return fmt.Errorf("%w yet: %v", errEndUnconfirmed, err)
	}
	for _, sh := range listed {
		if sh.id == r.info.id {
			if sh.endSeq == "" {
				r.s.env.Metrics.endsUnconfirmed.Incr(1, r.s.conf.Name, r.info.id)
				return fmt.Errorf("%w: it lists the shard open", errEndUnconfirmed)
			}
			return nil
		}
	}
	return nil
}
