package kinesisfake

import (
	"sort"
	"time"
)

// Behavior: UpdateShardCount.
//
// AWS rescales a stream to TargetShardCount open shards with UNIFORM_SCALING
// (the only scaling type), by a series of splits and merges that leaves the
// hash key space evenly divided; the target must lie between half and double
// the current open shard count. The stream must be ACTIVE and is UPDATING
// meanwhile. The fake does the same at once: it first splits open shards at
// every new boundary that falls inside one, then merges, left to right, the
// shards inside each new range, so the lineage is made of ordinary splits and
// merges (intermediate shards included, which are closed and empty). The
// target range check answers InvalidArgumentException; AWS's limit of updates
// per day is not modelled.

type updateShardCountInput struct {
	StreamName       string
	StreamARN        string
	TargetShardCount int
	ScalingType      string
}

type updateShardCountOutput struct {
	StreamName        string
	StreamARN         string
	CurrentShardCount int
	TargetShardCount  int
}

func (s *Server) updateShardCount(c *call) (any, error) {
	var in updateShardCountInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.ScalingType != "UNIFORM_SCALING" {
		return nil, errf(CodeValidation, "1 validation error detected: Value '%s' at 'scalingType' failed to satisfy constraint: Member must satisfy enum value set: [UNIFORM_SCALING]", in.ScalingType)
	}
	var out updateShardCountOutput
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.activeStream(streamRef{in.StreamName, in.StreamARN}, now, false)
		if err != nil {
			return err
		}
		current := len(sm.openShards())
		if in.TargetShardCount < 1 || in.TargetShardCount > 2*current || 2*in.TargetShardCount < current {
			return errf(CodeInvalidArgument, "TargetShardCount %d must be between half and double the current open shard count %d of stream %s.", in.TargetShardCount, current, sm.name)
		}
		st.uniformScale(sm, in.TargetShardCount, now)
		sm.updatingUntil = now.Add(st.s.cfg.streamDelay)
		out = updateShardCountOutput{StreamName: sm.name, StreamARN: sm.arn, CurrentShardCount: current, TargetShardCount: in.TargetShardCount}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (st *state) uniformScale(sm *stream, target int, now time.Time) {
	starts := evenStarts(target)
	for _, b := range starts[1:] {
		if sh := sm.shardFor(b); sh != nil && sh.start != b {
			st.split(sh, b, now)
		}
	}
	for i, lo := range starts {
		hi := maxHashKey
		if i+1 < target {
			hi = sub1(starts[i+1])
		}
		for {
			var in []*shard
			for _, sh := range sm.shards {
				if !sh.closed && sh.start.Cmp(lo) >= 0 && sh.end.Cmp(hi) <= 0 {
					in = append(in, sh)
				}
			}
			if len(in) < 2 {
				break
			}
			sort.Slice(in, func(a, b int) bool { return in[a].start.Cmp(in[b].start) < 0 })
			st.merge(in[0], in[1], now)
		}
	}
}
