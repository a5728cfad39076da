package kinesisfake

import "time"

// Behavior: UpdateStreamRecordDistributionStrategy.
//
// AWS switches an ON_DEMAND stream between USER_PARTITION_KEY (records
// placed by the hash of their partition key, or their explicit hash key)
// and AUTO (the service places records, keys ignored); a PROVISIONED stream
// refuses AUTO with InvalidArgumentException. The stream must be ACTIVE.
// Records already written keep their shards; the switch may come at any
// time, back and forth. The fake does the same, at once. The answer is
// empty.

type updateDistributionInput struct {
	StreamARN                  string
	RecordDistributionStrategy string
}

func (s *Server) updateStreamRecordDistributionStrategy(c *call) (any, error) {
	var in updateDistributionInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return struct{}{}, s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.activeStream(streamRef{ARN: in.StreamARN}, now, false)
		if err != nil {
			return err
		}
		return st.setDistribution(sm, in.RecordDistributionStrategy)
	})
}

func (st *state) setDistribution(sm *stream, strategy string) *apiError {
	if err := validDistribution(sm.name, strategy, sm.props.onDemand); err != nil {
		return err
	}
	sm.props.distribution = strategy
	return nil
}

// SetRecordDistribution switches a stream's RecordDistributionStrategy
// ("AUTO" or "USER_PARTITION_KEY") at once, as the operation would.
func (s *Server) SetRecordDistribution(stream, strategy string) error {
	return s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{Name: stream})
		if err != nil {
			return err
		}
		return st.setDistribution(sm, strategy)
	})
}
