package kinesisfake

import (
	"time"
)

// Behavior: RegisterStreamConsumer.
//
// AWS registers an enhanced fan-out consumer on a stream (named by StreamARN
// only): the consumer is CREATING, then ACTIVE a few seconds later. Its ARN is
// the stream ARN + "/consumer/<name>:<creation epoch seconds>". A name already
// registered (in any status) is a ResourceInUseException. Quotas: 5 calls per
// second per account, at most 5 consumers CREATING at once per account and at
// most 20 consumers per stream, 50 on an account with On-demand Advantage
// (LimitExceededException). The fake does the
// same; the CREATING time is ConsumerActivationDelay, and the consumer-count
// limits are quotas (off with Quotas(false)); OnDemandAdvantage raises the
// per-stream one.

type registerStreamConsumerInput struct {
	StreamARN    string
	ConsumerName string
}

func (s *Server) registerStreamConsumer(c *call) (any, error) {
	var in registerStreamConsumerInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.StreamARN == "" {
		return nil, errf(CodeValidation, "1 validation error detected: Value null at 'streamARN' failed to satisfy constraint: Member must not be null")
	}
	if err := validName("consumerName", in.ConsumerName); err != nil {
		return nil, err
	}
	var out struct{ Consumer consumerJSON }
	err := s.doErr(func(st *state, now time.Time) *apiError {
		if !st.limit("RegisterStreamConsumer", registerTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for RegisterStreamConsumer for account %s.", st.s.cfg.acct)
		}
		sm, err := st.activeStream(streamRef{ARN: in.StreamARN}, now, true)
		if err != nil {
			return err
		}
		cons, err := st.registerConsumer(sm, in.ConsumerName, now, st.s.cfg.consumerActivate, st.s.cfg.quotas)
		if err != nil {
			return err
		}
		out.Consumer = cons.toJSON(now, false)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (st *state) registerConsumer(sm *stream, name string, now time.Time, activation time.Duration, quotas bool) (*consumer, *apiError) {
	if sm.consumerByName(name) != nil {
		return nil, errf(CodeResourceInUse, "Consumer %s under stream %s already exists for account %s.", name, sm.name, st.s.cfg.acct)
	}
	if quotas {
		if limit := st.s.cfg.consumerLimit(); len(sm.consumers) >= limit {
			return nil, errf(CodeLimitExceeded, "Stream %s under account %s already has %d registered consumers.", sm.name, st.s.cfg.acct, limit)
		}
		creating := 0
		for _, other := range st.streams {
			for _, c := range other.consumers {
				if c.status(now) == statusCreating {
					creating++
				}
			}
		}
		if creating >= maxCreating {
			return nil, errf(CodeLimitExceeded, "Account %s already has %d consumers in CREATING status.", st.s.cfg.acct, maxCreating)
		}
	}
	c := &consumer{
		name:     name,
		arn:      st.s.consumerARN(sm.name, name, now),
		stream:   sm,
		created:  now,
		activeAt: now.Add(activation),
		subs:     map[int]*subscription{},
		lastSub:  map[int]time.Time{},
	}
	sm.consumers = append(sm.consumers, c)
	return c, nil
}
