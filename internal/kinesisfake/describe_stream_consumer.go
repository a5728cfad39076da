package kinesisfake

import (
	"time"
)

// Behavior: DescribeStreamConsumer.
//
// AWS describes a consumer named by ConsumerARN, or by StreamARN and
// ConsumerName, in any status (CREATING, ACTIVE, DELETING); an unknown one is
// a ResourceNotFoundException. 20 calls per second per stream
// (LimitExceededException beyond). The fake does the same. A ConsumerARN wins
// when both forms are given.

type consumerRefInput struct {
	StreamARN    string
	ConsumerName string
	ConsumerARN  string
}

func (s *Server) describeStreamConsumer(c *call) (any, error) {
	var in consumerRefInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	var out struct{ ConsumerDescription consumerJSON }
	err := s.doErr(func(st *state, now time.Time) *apiError {
		cons, err := st.lookupConsumer(in)
		if err != nil {
			return err
		}
		if !st.limit("DescribeStreamConsumer/"+cons.stream.name, describeConsTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for DescribeStreamConsumer for stream %s under account %s.", cons.stream.name, st.s.cfg.acct)
		}
		out.ConsumerDescription = cons.toJSON(now, true)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lookupConsumer resolves a consumer named by ARN or by stream ARN and name.
func (st *state) lookupConsumer(in consumerRefInput) (*consumer, *apiError) {
	if in.ConsumerARN != "" {
		return st.lookupConsumerARN(in.ConsumerARN)
	}
	if in.StreamARN == "" || in.ConsumerName == "" {
		return nil, errf(CodeInvalidArgument, "Either ConsumerARN or both StreamARN and ConsumerName must be provided.")
	}
	sm, err := st.lookupStream(streamRef{ARN: in.StreamARN})
	if err != nil {
		return nil, err
	}
	if c := sm.consumerByName(in.ConsumerName); c != nil {
		return c, nil
	}
	return nil, errf(CodeResourceNotFound, "Consumer %s under stream %s not found for account %s.", in.ConsumerName, sm.name, st.s.cfg.acct)
}
