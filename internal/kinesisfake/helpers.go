package kinesisfake

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Helpers for tests: they act on the state directly, without HTTP, quotas or
// faults, and are safe for concurrent use. Errors are the API errors the
// matching operation would answer (their text starts with the code).

// CreateStream creates an ACTIVE stream with n shards; opts as Stream's.
func (s *Server) CreateStream(name string, n int, opts ...StreamOpt) error {
	return s.doErr(func(st *state, now time.Time) *apiError {
		if err := validName("streamName", name); err != nil {
			return err
		}
		_, err := st.createStream(name, n, applyStreamOpts(opts), now, true)
		return err
	})
}

// DeleteStream deletes a stream and its consumers at once.
func (s *Server) DeleteStream(name string) error {
	return s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{Name: name})
		if err != nil {
			return err
		}
		return st.deleteStream(sm, true, now)
	})
}

// Put stores a record as PutRecord would and returns its shard and sequence
// number. Write quotas do not apply.
func (s *Server) Put(stream, partitionKey string, data []byte) (shardID, seq string, err error) {
	return s.put(stream, partitionKey, nil, data)
}

// PutWithHashKey is Put with an explicit hash key (a decimal 128-bit number).
func (s *Server) PutWithHashKey(stream, explicitHashKey, partitionKey string, data []byte) (shardID, seq string, err error) {
	return s.put(stream, partitionKey, &explicitHashKey, data)
}

func (s *Server) put(stream, pk string, explicit *string, data []byte) (shardID, seq string, err error) {
	if err := validRecord("", pk, data, explicit); err != nil {
		return "", "", err
	}
	data = append([]byte(nil), data...) // the caller may reuse its buffer
	err = s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.readableStream(streamRef{Name: stream}, now)
		if err != nil {
			return err
		}
		if err := sm.checkRecordSize("", data); err != nil {
			return err
		}
		sh, rec, err := st.put(sm, pk, explicit, data, now, false)
		if err != nil {
			return err
		}
		shardID, seq = sh.id, rec.seq
		return nil
	})
	return shardID, seq, err
}

// PutToShard stores n records in one shard of stream, each with data from
// gen(i), in one turn of the state goroutine: the fast way to load a
// benchmark. The partition key is "pk"; the hash key is the shard's first.
func (s *Server) PutToShard(stream, shardID string, n int, gen func(i int) []byte) error {
	return s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.readableStream(streamRef{Name: stream}, now)
		if err != nil {
			return err
		}
		sh, err := st.lookupShard(sm, shardID)
		if err != nil {
			return err
		}
		if sh.closed {
			return errf(CodeInvalidArgument, "Shard %s is closed.", shardID)
		}
		for i := range n {
			st.appendRecord(sh, "pk", gen(i), now)
		}
		return nil
	})
}

// SplitShard splits an open shard as SplitShard would; an empty
// newStartingHashKey splits it in the middle. It returns the children.
func (s *Server) SplitShard(stream, shardID, newStartingHashKey string) (children []string, err error) {
	err = s.doErr(func(st *state, now time.Time) *apiError {
		if newStartingHashKey == "" {
			sm, err := st.lookupStream(streamRef{Name: stream})
			if err != nil {
				return err
			}
			sh, err := st.lookupShard(sm, shardID)
			if err != nil {
				return err
			}
			newStartingHashKey = mid(sh.start, sh.end).String()
		}
		if err := st.splitShard(streamRef{Name: stream}, shardID, newStartingHashKey, now); err != nil {
			return err
		}
		sh := st.streams[stream].shard(shardID)
		for _, c := range sh.children {
			children = append(children, c.id)
		}
		return nil
	})
	return children, err
}

// MergeShards merges two adjacent open shards as MergeShards would and
// returns the child.
func (s *Server) MergeShards(stream, shardID, adjacentShardID string) (child string, err error) {
	err = s.doErr(func(st *state, now time.Time) *apiError {
		if err := st.mergeShards(streamRef{Name: stream}, shardID, adjacentShardID, now); err != nil {
			return err
		}
		child = st.streams[stream].shard(shardID).children[0].id
		return nil
	})
	return child, err
}

// Shards returns every shard of stream, as ListShards would list them.
func (s *Server) Shards(stream string) ([]types.Shard, error) {
	var out []types.Shard
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{Name: stream})
		if err != nil {
			return err
		}
		for _, sh := range sm.shards {
			t := types.Shard{
				ShardId:      aws.String(sh.id),
				HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(sh.startStr), EndingHashKey: aws.String(sh.endStr)},
				SequenceNumberRange: &types.SequenceNumberRange{
					StartingSequenceNumber: aws.String(sh.startSeq),
				},
			}
			if sh.closed {
				t.SequenceNumberRange.EndingSequenceNumber = aws.String(sh.endSeq)
			}
			if sh.parent != "" {
				t.ParentShardId = aws.String(sh.parent)
			}
			if sh.adjacentParent != "" {
				t.AdjacentParentShardId = aws.String(sh.adjacentParent)
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// ShardRecords returns a copy of every record left in a shard (not trimmed),
// oldest first.
func (s *Server) ShardRecords(stream, shardID string) ([]types.Record, error) {
	var recs []record
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{Name: stream})
		if err != nil {
			return err
		}
		sh, err := st.lookupShard(sm, shardID)
		if err != nil {
			return err
		}
		recs = sh.records[sh.trimmed:len(sh.records):len(sh.records)]
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]types.Record, len(recs))
	for i, r := range recs {
		out[i] = types.Record{
			SequenceNumber:              aws.String(r.seq),
			PartitionKey:                aws.String(r.pk),
			Data:                        append([]byte(nil), r.data...),
			ApproximateArrivalTimestamp: aws.Time(r.arrival),
		}
	}
	return out, nil
}

// RegisterConsumer registers an ACTIVE consumer on stream at once and returns
// its ARN.
func (s *Server) RegisterConsumer(stream, name string) (arn string, err error) {
	err = s.doErr(func(st *state, now time.Time) *apiError {
		if err := validName("consumerName", name); err != nil {
			return err
		}
		sm, err := st.lookupStream(streamRef{Name: stream})
		if err != nil {
			return err
		}
		c, err := st.registerConsumer(sm, name, now, 0, false)
		if err != nil {
			return err
		}
		arn = c.arn
		return nil
	})
	return arn, err
}

// ConsumerARN returns the ARN of a registered consumer, or "" if there is
// none.
func (s *Server) ConsumerARN(stream, name string) string {
	var arn string
	_ = s.do(func(st *state, now time.Time) {
		if sm, ok := st.streams[stream]; ok {
			if c := sm.consumerByName(name); c != nil {
				arn = c.arn
			}
		}
	})
	return arn
}

// Subscriptions returns the number of SubscribeToShard streams being served.
func (s *Server) Subscriptions() int {
	var n int
	_ = s.do(func(st *state, now time.Time) { n = st.subs })
	return n
}
