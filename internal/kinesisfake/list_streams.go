package kinesisfake

import (
	"sort"
	"time"
)

// Behavior: ListStreams.
//
// AWS lists stream names and summaries in name order, a page at a time (Limit,
// default 100, at most 10,000), continuing after ExclusiveStartStreamName or
// from a NextToken, with HasMoreStreams. The fake does the same, streams in
// every status included, without a rate limit.

type listStreamsInput struct {
	Limit                    *int
	ExclusiveStartStreamName string
	NextToken                string
}

type streamSummaryItemJSON struct {
	StreamName              string
	StreamARN               string
	StreamStatus            string
	StreamModeDetails       streamModeJSON
	StreamCreationTimestamp epochTime
}

type listStreamsOutput struct {
	StreamNames     []string
	StreamSummaries []streamSummaryItemJSON
	HasMoreStreams  bool
	NextToken       string `json:",omitempty"`
}

func (s *Server) listStreams(c *call) (any, error) {
	var in listStreamsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	limit, err := listLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	after := in.ExclusiveStartStreamName
	if in.NextToken != "" {
		t, ok := s.open(tokenListStreams, in.NextToken)
		if !ok {
			return nil, errf(CodeInvalidArgument, "Invalid NextToken.")
		}
		after = t.str
	}
	out := listStreamsOutput{StreamNames: []string{}, StreamSummaries: []streamSummaryItemJSON{}}
	err = s.do(func(st *state, now time.Time) {
		names := make([]string, 0, len(st.streams))
		for name := range st.streams {
			if name > after {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		if len(names) > limit {
			names = names[:limit]
			out.HasMoreStreams = true
			out.NextToken = s.seal(tokenListStreams, token{issued: now, str: names[limit-1]})
		}
		for _, name := range names {
			sm := st.streams[name]
			out.StreamNames = append(out.StreamNames, name)
			out.StreamSummaries = append(out.StreamSummaries, streamSummaryItemJSON{
				StreamName:              name,
				StreamARN:               sm.arn,
				StreamStatus:            sm.status(now),
				StreamModeDetails:       streamModeJSON{sm.props.mode()},
				StreamCreationTimestamp: epochTime{sm.created},
			})
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
