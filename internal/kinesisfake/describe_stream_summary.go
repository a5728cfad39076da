package kinesisfake

import (
	"time"
)

// Behavior: DescribeStreamSummary.
//
// AWS describes a stream without its shards, in any status, and allows 20
// calls per second per account (LimitExceededException beyond). The fake does
// the same. Retention is reported as 24 hours (the fake trims only on a
// test's TrimShard), encryption as NONE; the mode, MaxRecordSizeInKiB and
// RecordDistributionStrategy as the stream has them; ConsumerCount counts
// registered consumers in every status.

type describeStreamSummaryInput struct {
	StreamName string
	StreamARN  string
}

type streamSummaryJSON struct {
	StreamName                 string
	StreamARN                  string
	StreamStatus               string
	StreamModeDetails          streamModeJSON
	RetentionPeriodHours       int
	StreamCreationTimestamp    epochTime
	EnhancedMonitoring         []enhancedMonitoringJSON
	EncryptionType             string
	OpenShardCount             int
	ConsumerCount              int
	MaxRecordSizeInKiB         int
	RecordDistributionStrategy string
}

type streamModeJSON struct{ StreamMode string }

type enhancedMonitoringJSON struct{ ShardLevelMetrics []string }

func (s *Server) describeStreamSummary(c *call) (any, error) {
	var in describeStreamSummaryInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	var out struct{ StreamDescriptionSummary streamSummaryJSON }
	err := s.doErr(func(st *state, now time.Time) *apiError {
		if !st.limit("DescribeStreamSummary", describeSummaryTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for DescribeStreamSummary for account %s.", st.s.cfg.acct)
		}
		sm, err := st.lookupStream(streamRef{in.StreamName, in.StreamARN})
		if err != nil {
			return err
		}
		out.StreamDescriptionSummary = streamSummaryJSON{
			StreamName:                 sm.name,
			StreamARN:                  sm.arn,
			StreamStatus:               sm.status(now),
			StreamModeDetails:          streamModeJSON{sm.props.mode()},
			RetentionPeriodHours:       24,
			StreamCreationTimestamp:    epochTime{sm.created},
			EnhancedMonitoring:         []enhancedMonitoringJSON{{ShardLevelMetrics: []string{}}},
			EncryptionType:             "NONE",
			OpenShardCount:             len(sm.openShards()),
			ConsumerCount:              len(sm.consumers),
			MaxRecordSizeInKiB:         sm.props.maxRecordKiB,
			RecordDistributionStrategy: sm.props.distribution,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
