package kinesisfake

import (
	"time"
)

// Behavior: ListShards.
//
// AWS lists a stream's shards in shard id order, closed shards included (with
// EndingSequenceNumber, ParentShardId and AdjacentParentShardId), a page at a
// time: MaxResults defaults to 1,000, values up to 10,000 are accepted but a
// page holds at most 1,000; NextToken (valid 300 s, then
// ExpiredNextTokenException) continues a listing and excludes StreamName,
// StreamCreationTimestamp and ExclusiveStartShardId; ExclusiveStartShardId
// starts after a shard. ShardFilter selects:
//
//   - AFTER_SHARD_ID: the shards after ShardId;
//   - AT_TRIM_HORIZON: the shards open at the trim horizon;
//   - FROM_TRIM_HORIZON (the default): every shard within retention;
//   - AT_LATEST: the open shards;
//   - AT_TIMESTAMP: the shards open at Timestamp;
//   - FROM_TIMESTAMP: the shards open at or after Timestamp (before the trim
//     horizon it means FROM_TRIM_HORIZON).
//
// The stream must be ACTIVE or UPDATING (ResourceInUseException otherwise);
// 1,000 calls per second per stream (LimitExceededException beyond). The fake
// does all of this. It never removes shards (TrimShard trims records only), so
// the trim horizon is the later of the stream's creation and 24 hours ago. A
// NextToken carries the filter of the call that started the listing; a
// ShardFilter sent with a NextToken is ignored.

type shardFilterInput struct {
	Type      string
	ShardId   string
	Timestamp *epochTime
}

type listShardsInput struct {
	StreamName              string
	StreamARN               string
	NextToken               string
	ExclusiveStartShardId   string
	MaxResults              *int
	StreamCreationTimestamp *epochTime
	ShardFilter             *shardFilterInput
}

type listShardsOutput struct {
	Shards    []shardJSON
	NextToken string `json:",omitempty"`
}

const (
	listShardsPage     = 1000
	listShardsMaxLimit = 10000
)

var shardFilterTypes = []string{"", "AFTER_SHARD_ID", "AT_TRIM_HORIZON", "FROM_TRIM_HORIZON", "AT_LATEST", "AT_TIMESTAMP", "FROM_TIMESTAMP"}

func filterCode(t string) (int, bool) {
	for i, x := range shardFilterTypes {
		if x == t {
			return i, true
		}
	}
	return 0, false
}

func (s *Server) listShards(c *call) (any, error) {
	var in listShardsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	limit := listShardsPage
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > listShardsMaxLimit {
			return nil, errf(CodeValidation, "1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 10000", *in.MaxResults)
		}
		limit = min(*in.MaxResults, listShardsPage)
	}

	// Where the listing starts and what it keeps.
	var (
		serial    int
		from      int
		filter    int
		filterTS  time.Time
		fromToken bool
	)
	if in.NextToken != "" {
		if in.StreamName != "" || in.StreamCreationTimestamp != nil || in.ExclusiveStartShardId != "" {
			return nil, errf(CodeInvalidArgument, "NextToken and StreamName, StreamCreationTimestamp or ExclusiveStartShardId cannot be provided together.")
		}
		t, ok := s.open(tokenListShards, in.NextToken)
		if !ok || len(t.nums) != 4 {
			return nil, errf(CodeInvalidArgument, "Invalid NextToken.")
		}
		if time.Since(t.issued) > nextTokenLifetime {
			return nil, errf(CodeExpiredNextToken, "The timestamp of the NextToken has expired (more than %v old).", nextTokenLifetime)
		}
		serial, from, filter = int(t.nums[0]), int(t.nums[1]), int(t.nums[2])
		filterTS = time.UnixMilli(int64(t.nums[3]))
		fromToken = true
	} else {
		if in.ExclusiveStartShardId != "" {
			i, ok := parseShardID(in.ExclusiveStartShardId)
			if !ok {
				return nil, errf(CodeValidation, "1 validation error detected: Value '%s' at 'exclusiveStartShardId' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+", in.ExclusiveStartShardId)
			}
			from = i + 1
		}
		if f := in.ShardFilter; f != nil {
			code, ok := filterCode(f.Type)
			if !ok || f.Type == "" {
				return nil, errf(CodeValidation, "1 validation error detected: Value '%s' at 'shardFilter.type' failed to satisfy constraint: Member must satisfy enum value set: [AFTER_SHARD_ID, AT_TRIM_HORIZON, FROM_TRIM_HORIZON, AT_LATEST, AT_TIMESTAMP, FROM_TIMESTAMP]", f.Type)
			}
			filter = code
			switch f.Type {
			case "AFTER_SHARD_ID":
				i, ok := parseShardID(f.ShardId)
				if !ok {
					return nil, errf(CodeInvalidArgument, "ShardFilter of type AFTER_SHARD_ID needs a valid ShardId.")
				}
				from = max(from, i+1)
			case "AT_TIMESTAMP", "FROM_TIMESTAMP":
				if f.Timestamp == nil {
					return nil, errf(CodeInvalidArgument, "ShardFilter of type %s needs a Timestamp.", f.Type)
				}
				filterTS = f.Timestamp.Time
			}
			if f.ShardId != "" && f.Type != "AFTER_SHARD_ID" {
				return nil, errf(CodeInvalidArgument, "ShardFilter ShardId can only be used with type AFTER_SHARD_ID.")
			}
			if f.Timestamp != nil && f.Type != "AT_TIMESTAMP" && f.Type != "FROM_TIMESTAMP" {
				return nil, errf(CodeInvalidArgument, "ShardFilter Timestamp can only be used with types AT_TIMESTAMP and FROM_TIMESTAMP.")
			}
		}
	}

	out := listShardsOutput{Shards: []shardJSON{}}
	err := s.doErr(func(st *state, now time.Time) *apiError {
		var sm *stream
		if fromToken {
			sm = st.bySerial[serial]
			if sm == nil {
				return errf(CodeResourceNotFound, "The stream of this NextToken under account %s no longer exists.", st.s.cfg.acct)
			}
			if in.StreamARN != "" && in.StreamARN != sm.arn {
				return errf(CodeInvalidArgument, "NextToken belongs to another stream than %s.", in.StreamARN)
			}
		} else {
			var err *apiError
			if sm, err = st.lookupStream(streamRef{in.StreamName, in.StreamARN}); err != nil {
				return err
			}
			if ts := in.StreamCreationTimestamp; ts != nil && ts.UnixMilli() != sm.created.UnixMilli() {
				return notFoundStream(st.s, sm.name)
			}
		}
		if _, err := st.activeStream(streamRef{Name: sm.name}, now, true); err != nil {
			return err
		}
		if !st.limit("ListShards/"+sm.name, listShardsTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for ListShards for stream %s under account %s.", sm.name, st.s.cfg.acct)
		}
		horizon := sm.created
		if h := now.Add(-24 * time.Hour); h.After(horizon) {
			horizon = h
		}
		young := horizon.Equal(sm.created)
		ftype := shardFilterTypes[filter]
		if ftype == "FROM_TIMESTAMP" && filterTS.Before(horizon) {
			ftype = "FROM_TRIM_HORIZON"
		}
		last := -1
		for i := from; i < len(sm.shards); i++ {
			sh := sm.shards[i]
			if !shardMatches(sh, ftype, filterTS, horizon, young) {
				continue
			}
			if len(out.Shards) == limit {
				out.NextToken = s.seal(tokenListShards, token{
					issued: now,
					nums:   []uint64{uint64(sm.serial), uint64(last + 1), uint64(filter), uint64(filterTS.UnixMilli())},
				})
				break
			}
			out.Shards = append(out.Shards, sh.toJSON())
			last = i
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// shardMatches applies a ShardFilter type to a shard. Shard times are in
// milliseconds, so a stream younger than the retention period has its trim
// horizon at creation and the shards open there are the initial ones, even if
// one was resharded within the same millisecond.
func shardMatches(sh *shard, ftype string, ts, horizon time.Time, young bool) bool {
	switch ftype {
	case "AT_TRIM_HORIZON":
		if young {
			return sh.initial
		}
		return !sh.opened.After(horizon) && (!sh.closed || sh.closedAt.After(horizon))
	case "AT_LATEST":
		return !sh.closed
	case "AT_TIMESTAMP":
		return !sh.opened.After(ts) && (!sh.closed || !sh.closedAt.Before(ts))
	case "FROM_TIMESTAMP":
		return !sh.closed || !sh.closedAt.Before(ts)
	}
	return true // "", FROM_TRIM_HORIZON, AFTER_SHARD_ID
}
