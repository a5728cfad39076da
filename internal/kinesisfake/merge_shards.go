package kinesisfake

import (
	"time"
)

// Behavior: MergeShards.
//
// AWS closes two open, adjacent shards (their hash key ranges touch;
// InvalidArgumentException otherwise) and opens one child covering both
// ranges, with ParentShardId ShardToMerge and AdjacentParentShardId
// AdjacentShardToMerge. Both parents get their EndingSequenceNumber. The
// stream must be ACTIVE (ResourceInUseException otherwise) and is UPDATING for
// a while afterwards. The fake does the same; the child exists at once and the
// UPDATING time is StreamStatusDelay (default 0).

type mergeShardsInput struct {
	StreamName           string
	StreamARN            string
	ShardToMerge         string
	AdjacentShardToMerge string
}

func (s *Server) mergeShards(c *call) (any, error) {
	var in mergeShardsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, s.doErr(func(st *state, now time.Time) *apiError {
		return st.mergeShards(streamRef{in.StreamName, in.StreamARN}, in.ShardToMerge, in.AdjacentShardToMerge, now)
	})
}

func (st *state) mergeShards(ref streamRef, shardID, adjacentID string, now time.Time) *apiError {
	sm, err := st.activeStream(ref, now, false)
	if err != nil {
		return err
	}
	a, err := st.lookupShard(sm, shardID)
	if err != nil {
		return err
	}
	b, err := st.lookupShard(sm, adjacentID)
	if err != nil {
		return err
	}
	if a == b {
		return errf(CodeInvalidArgument, "A shard cannot be merged with itself (%s).", a.id)
	}
	if a.closed || b.closed {
		return errf(CodeInvalidArgument, "Shards %s and %s in stream %s must both be open to be merged.", a.id, b.id, sm.name)
	}
	if add1(a.end) != b.start && add1(b.end) != a.start {
		return errf(CodeInvalidArgument, "Shards %s and %s in stream %s under account %s are not an adjacent pair of shards eligible for merging", a.id, b.id, sm.name, st.s.cfg.acct)
	}
	if len(sm.shards)+1 > maxShardsPerStream {
		return errf(CodeLimitExceeded, "Stream %s would exceed %d shards.", sm.name, maxShardsPerStream)
	}
	st.merge(a, b, now)
	sm.updatingUntil = now.Add(st.s.cfg.streamDelay)
	return nil
}

// merge closes a and b (adjacent, open) and opens their child.
func (st *state) merge(a, b *shard, now time.Time) *shard {
	st.closeShard(a, now)
	st.closeShard(b, now)
	lo, hi := a.start, b.end
	if b.start.Cmp(a.start) < 0 {
		lo, hi = b.start, a.end
	}
	child := st.addShard(a.stream, lo, hi, a.id, b.id, now)
	a.children = []*shard{child}
	b.children = []*shard{child}
	return child
}
