package kinesisfake

import (
	"time"
)

// Behavior: DescribeStream.
//
// AWS describes a stream with a page of its shards (Limit, default 100, at
// most 10,000; ExclusiveStartShardId; HasMoreShards), closed shards included,
// in any status, and allows 10 calls per second per account
// (LimitExceededException beyond). The fake does the same, listing shards in
// shard id order.

type describeStreamInput struct {
	StreamName            string
	StreamARN             string
	Limit                 *int
	ExclusiveStartShardId string
}

type streamDescriptionJSON struct {
	StreamName              string
	StreamARN               string
	StreamStatus            string
	StreamModeDetails       streamModeJSON
	Shards                  []shardJSON
	HasMoreShards           bool
	RetentionPeriodHours    int
	StreamCreationTimestamp epochTime
	EnhancedMonitoring      []enhancedMonitoringJSON
	EncryptionType          string
}

func (s *Server) describeStream(c *call) (any, error) {
	var in describeStreamInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	limit, err := listLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	var out struct{ StreamDescription streamDescriptionJSON }
	err = s.doErr(func(st *state, now time.Time) *apiError {
		if !st.limit("DescribeStream", describeStreamTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for DescribeStream for account %s.", st.s.cfg.acct)
		}
		sm, err := st.lookupStream(streamRef{in.StreamName, in.StreamARN})
		if err != nil {
			return err
		}
		from := 0
		if in.ExclusiveStartShardId != "" {
			i, ok := parseShardID(in.ExclusiveStartShardId)
			if !ok {
				return errf(CodeValidation, "1 validation error detected: Value '%s' at 'exclusiveStartShardId' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+", in.ExclusiveStartShardId)
			}
			from = i + 1
		}
		shards := []shardJSON{}
		i := from
		for ; i < len(sm.shards) && len(shards) < limit; i++ {
			shards = append(shards, sm.shards[i].toJSON())
		}
		out.StreamDescription = streamDescriptionJSON{
			StreamName:              sm.name,
			StreamARN:               sm.arn,
			StreamStatus:            sm.status(now),
			StreamModeDetails:       streamModeJSON{sm.props.mode()},
			Shards:                  shards,
			HasMoreShards:           i < len(sm.shards),
			RetentionPeriodHours:    24,
			StreamCreationTimestamp: epochTime{sm.created},
			EnhancedMonitoring:      []enhancedMonitoringJSON{{ShardLevelMetrics: []string{}}},
			EncryptionType:          "NONE",
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
