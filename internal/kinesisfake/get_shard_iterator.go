package kinesisfake

import (
	"time"
)

// Behavior: GetShardIterator.
//
// AWS returns an opaque iterator for a shard (open or closed) and a starting
// position: TRIM_HORIZON, LATEST, AT_TIMESTAMP (Timestamp required),
// AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER (StartingSequenceNumber
// required; a number of another shard is an InvalidArgumentException). The
// iterator expires after 5 minutes. A shard takes 5 calls per second
// (ProvisionedThroughputExceededException beyond). The fake does the same; the
// lifetime is IteratorLifetime. LATEST points just after the shard's newest
// record when the iterator is made, so records put afterwards are read. A
// sequence number older than the trim horizon is an InvalidArgumentException
// (see retention.go).

type getShardIteratorInput struct {
	StreamName             string
	StreamARN              string
	ShardId                string
	ShardIteratorType      string
	StartingSequenceNumber string
	Timestamp              *epochTime
}

func (s *Server) getShardIterator(c *call) (any, error) {
	var in getShardIteratorInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	var out struct{ ShardIterator string }
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.readableStream(streamRef{in.StreamName, in.StreamARN}, now)
		if err != nil {
			return err
		}
		sh, err := st.lookupShard(sm, in.ShardId)
		if err != nil {
			return err
		}
		pos, err := startPos(sh, in.ShardIteratorType, in.StartingSequenceNumber, in.Timestamp, c.op, "StartingSequenceNumber")
		if err != nil {
			return err
		}
		if !st.limit("GetShardIterator/"+sm.name+"/"+sh.id, getShardIterTPS, now) {
			return errf(CodeProvisionedThroughput, "Rate exceeded for shard %s in stream %s under account %s.", sh.id, sm.name, st.s.cfg.acct)
		}
		out.ShardIterator = s.sealIterator(iterator{streamSerial: sm.serial, shardIndex: sh.index, pos: pos, issued: now})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
