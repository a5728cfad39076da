package kinesisfake

import (
	"time"
)

// Behavior: SplitShard.
//
// AWS closes an open shard and opens two children: the first covers the
// parent's hash keys below NewStartingHashKey, the second the rest, so
// NewStartingHashKey must lie above the parent's starting hash key and at most
// at its ending hash key (InvalidArgumentException otherwise). Both children
// name the parent as ParentShardId. The parent gets its EndingSequenceNumber
// and stays readable until its records expire. The stream must be ACTIVE
// (ResourceInUseException while CREATING, UPDATING or DELETING) and is
// UPDATING for a while afterwards. The fake does the same; the children exist
// at once and the UPDATING time is StreamStatusDelay (default 0). Splitting a
// closed shard is an InvalidArgumentException.

type splitShardInput struct {
	StreamName         string
	StreamARN          string
	ShardToSplit       string
	NewStartingHashKey string
}

func (s *Server) splitShard(c *call) (any, error) {
	var in splitShardInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, s.doErr(func(st *state, now time.Time) *apiError {
		return st.splitShard(streamRef{in.StreamName, in.StreamARN}, in.ShardToSplit, in.NewStartingHashKey, now)
	})
}

func (st *state) splitShard(ref streamRef, shardID, newStart string, now time.Time) *apiError {
	sm, err := st.activeStream(ref, now, false)
	if err != nil {
		return err
	}
	sh, err := st.lookupShard(sm, shardID)
	if err != nil {
		return err
	}
	k, ok := parseHashKey(newStart)
	if !ok {
		return errf(CodeInvalidArgument, "NewStartingHashKey %q is not a hash key in [0, 2^128-1].", newStart)
	}
	if sh.closed {
		return errf(CodeInvalidArgument, "Shard %s in stream %s under account %s is closed and cannot be split.", sh.id, sm.name, st.s.cfg.acct)
	}
	if k.Cmp(sh.start) <= 0 || k.Cmp(sh.end) > 0 {
		return errf(CodeInvalidArgument, "NewStartingHashKey %s must be above the starting hash key %s and at most the ending hash key %s of shard %s.", newStart, sh.startStr, sh.endStr, sh.id)
	}
	if len(sm.shards)+2 > maxShardsPerStream {
		return errf(CodeLimitExceeded, "Stream %s would exceed %d shards.", sm.name, maxShardsPerStream)
	}
	st.split(sh, k, now)
	sm.updatingUntil = now.Add(st.s.cfg.streamDelay)
	return nil
}

// split closes sh and opens children covering [start, k-1] and [k, end].
func (st *state) split(sh *shard, k hashKey, now time.Time) []*shard {
	st.closeShard(sh, now)
	a := st.addShard(sh.stream, sh.start, sub1(k), sh.id, "", now)
	b := st.addShard(sh.stream, k, sh.end, sh.id, "", now)
	sh.children = []*shard{a, b}
	return sh.children
}
