package kinesisfake

import (
	"time"
)

// Behavior: DeregisterStreamConsumer.
//
// AWS deregisters a consumer named by ConsumerARN, or by StreamARN and
// ConsumerName: it is DELETING for a while, then gone; its subscriptions end.
// 5 calls per second per account (LimitExceededException beyond). The fake
// does the same; the DELETING time is ConsumerDeletionDelay. Live
// subscriptions of the consumer receive a ResourceNotFoundException exception
// frame and end (so a client that takes ResourceNotFoundException for the end
// of a shard loses data, as Flink once did). Deregistering a consumer that is
// already DELETING is a ResourceNotFoundException.

func (s *Server) deregisterStreamConsumer(c *call) (any, error) {
	var in consumerRefInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, s.doErr(func(st *state, now time.Time) *apiError {
		if !st.limit("DeregisterStreamConsumer", deregisterTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for DeregisterStreamConsumer for account %s.", st.s.cfg.acct)
		}
		cons, err := st.lookupConsumer(in)
		if err != nil {
			return err
		}
		if cons.deleting {
			return errf(CodeResourceNotFound, "Consumer %s under account %s is already being deleted.", cons.arn, st.s.cfg.acct)
		}
		st.deregisterConsumer(cons, now)
		return nil
	})
}

func (st *state) deregisterConsumer(c *consumer, now time.Time) {
	st.endConsumerSubs(c, CodeResourceNotFound, "Consumer "+c.arn+" under account "+st.s.cfg.acct+" is being deleted.")
	c.deleting = true
	c.deleteAt = now.Add(st.s.cfg.consumerDelete)
	if st.s.cfg.consumerDelete <= 0 {
		sm := c.stream
		for i, x := range sm.consumers {
			if x == c {
				sm.consumers = append(sm.consumers[:i:i], sm.consumers[i+1:]...)
				break
			}
		}
		return
	}
	st.scheduleSweep(c.deleteAt)
}
