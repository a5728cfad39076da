package read

import (
	"context"
	"sync/atomic"
	"time"
)

// placement is how the stream places its records, as last described: by
// the hash of each record's partition key (USER_PARTITION_KEY, the
// default) or by itself (AUTO, on-demand streams since 2026: keys are
// ignored, records of one key land on any shard, and no order per key
// exists). A stream may switch at any time; records already written keep
// their shards. On an AUTO stream the user records of an aggregate are
// not checked against the shard's hash key range: nearly every one would
// be outside it, and none is misplaced. Readers load auto for every
// aggregate; the run loop describes the stream at start and, at most every
// Limits.Placement, at a discovery.
type placement struct {
	auto        atomic.Bool
	describedAt time.Time // run loop only
}

// notePlacement records how the stream places records, says so when it is
// AUTO at start or when it changed, and sets the stream's gauge.
func (s *Stream) notePlacement(auto, atStart bool) {
	was := s.placement.auto.Swap(auto)
	var v int64
	if auto {
		v = 1
	}
	s.env.Metrics.autoPlacement.Set(v, s.conf.Name)
	switch {
	case auto && (atStart || !was):
		what := "places records itself"
		if !atStart {
			what = "now places records itself"
		}
		s.env.Log.Infof("stream %s %s (record distribution AUTO): partition keys do not choose shards, so records of one key are spread over shards and no order per key exists; each shard's records are read in order. User records of aggregates are not checked against their shard's hash key range", s.conf.Name, what)
	case !auto && was && !atStart:
		s.env.Log.Infof("stream %s places records by partition key again (record distribution USER_PARTITION_KEY): records written from now on keep the order of their key; those written before keep their shards", s.conf.Name)
	}
}

// describePlacement describes the stream, when it may be described and
// the last time is Limits.Placement ago, to learn a switch of its placement.
// A failed describe changes nothing (the next discovery tries again).
func (s *Stream) describePlacement(ctx context.Context, now time.Time) {
	if s.conf.Describe == nil || now.Sub(s.placement.describedAt) < s.env.Limits.Placement {
		return
	}
	s.placement.describedAt = now
	desc, err := s.conf.Describe(ctx)
	if err != nil {
		s.env.Log.Debugf("stream %s: describing it for its record placement: %v", s.conf.Name, err)
		return
	}
	s.notePlacement(desc.AutoPlacement, false)
}
