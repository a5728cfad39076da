package read

import (
	"context"
	"errors"
	"fmt"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// errRecreated: the shard listed under a reader's shard id is another one.
var errRecreated = errors.New("the stream was deleted and created again")

// sameShard checks, before a refused start falls back to TRIM_HORIZON, that
// the shard listed now is the one the start's sequence number belongs to. A
// stream deleted and created again under its name has shards of the same ids:
// a reader of the old one, refused there, must not read the new one (its
// records would come again once discovery restarts the stream's readers).
//
// It answers the shard as listed when it is the same, an error wrapping
// errRecreated when it is not, and another error when it cannot tell (the
// stream is deleted, not listed, or the listing failed).
func (r *shardReader) sameShard(ctx context.Context, from shard.Start) (shardInfo, error) {
	listed, err := listShards(ctx, r.s.conf.Client, r.s.conf.ARN)
	if err != nil {
		return shardInfo{}, fmt.Errorf("cannot tell whether the shard is still the same: %w", err)
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
			return shardInfo{}, fmt.Errorf("the shard now starts at sequence number %s, not %s: %w", sh.startSeq, known, errRecreated)
		}
		if known == "" && isSequenceStart(from) && sh.startSeq != "" && shard.CompareSequence(from.Sequence, sh.startSeq) < 0 {
			// Nothing tells which shard the start was of but the start.
			return shardInfo{}, fmt.Errorf("sequence number %s is older than the shard, which starts at %s: %w", from.Sequence, sh.startSeq, errRecreated)
		}
		return sh, nil
	}
	return shardInfo{}, errors.New("the shard is no longer listed")
}
