package kinesisfake

import (
	"sort"
	"time"
)

// Behavior: ListStreamConsumers.
//
// AWS lists the consumers of a stream (StreamARN required), in every status, a
// page at a time: MaxResults defaults to 100, values up to 10,000 are accepted
// but a page holds at most 100; NextToken (valid 300 s, then
// ExpiredNextTokenException) continues a listing. 5 calls per second per
// stream (LimitExceededException beyond). The fake does the same, listing
// consumers in name order; a NextToken holds the last name returned, so
// consumers registered or deleted between pages neither repeat nor shift the
// listing (the off-by-one seen in kinesis-mock does not happen here).

type listStreamConsumersInput struct {
	StreamARN               string
	NextToken               string
	MaxResults              *int
	StreamCreationTimestamp *epochTime
}

type listStreamConsumersOutput struct {
	Consumers []consumerJSON
	NextToken string `json:",omitempty"`
}

const listConsumersPage = 100

func (s *Server) listStreamConsumers(c *call) (any, error) {
	var in listStreamConsumersInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.StreamARN == "" {
		return nil, errf(CodeValidation, "1 validation error detected: Value null at 'streamARN' failed to satisfy constraint: Member must not be null")
	}
	limit := listConsumersPage
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 10000 {
			return nil, errf(CodeValidation, "1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 10000", *in.MaxResults)
		}
		limit = min(*in.MaxResults, listConsumersPage)
	}
	after := ""
	if in.NextToken != "" {
		t, ok := s.open(tokenListConsumers, in.NextToken)
		if !ok {
			return nil, errf(CodeInvalidArgument, "Invalid NextToken.")
		}
		if time.Since(t.issued) > nextTokenLifetime {
			return nil, errf(CodeExpiredNextToken, "The timestamp of the NextToken has expired (more than %v old).", nextTokenLifetime)
		}
		after = t.str
	}
	out := listStreamConsumersOutput{Consumers: []consumerJSON{}}
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{ARN: in.StreamARN})
		if err != nil {
			return err
		}
		if ts := in.StreamCreationTimestamp; ts != nil && ts.UnixMilli() != sm.created.UnixMilli() {
			return notFoundStream(st.s, sm.name)
		}
		if !st.limit("ListStreamConsumers/"+sm.name, listConsumersTPS, now) {
			return errf(CodeLimitExceeded, "Rate exceeded for ListStreamConsumers for stream %s under account %s.", sm.name, st.s.cfg.acct)
		}
		var list []*consumer
		for _, c := range sm.consumers {
			if c.name > after {
				list = append(list, c)
			}
		}
		sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
		if len(list) > limit {
			list = list[:limit]
			out.NextToken = s.seal(tokenListConsumers, token{issued: now, str: list[limit-1].name})
		}
		for _, c := range list {
			out.Consumers = append(out.Consumers, c.toJSON(now, false))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
