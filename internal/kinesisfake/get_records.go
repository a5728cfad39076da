package kinesisfake

import (
	"strconv"
	"time"
)

// Behavior: GetRecords.
//
// AWS returns up to Limit records (default and maximum 10,000) and at most
// 10 MiB from the iterator's position, the next iterator, and
// MillisBehindLatest. An iterator older than 5 minutes is an
// ExpiredIteratorException. A shard serves 5 calls per second and 2 MiB per
// second shared by every polling reader
// (ProvisionedThroughputExceededException beyond); after a 10 MiB response
// the shard's calls are refused for about 5 seconds. At the end of a closed
// shard NextShardIterator is absent and ChildShards lists the children with
// their hash key ranges and parents.
//
// The fake does the same. The byte budget is a token bucket of 2 MiB/s with a
// 2 MiB burst that may go into debt: a call is served while the budget is
// positive and then pays for what it returned, so a 10 MiB response blocks the
// shard for 4 to 5 seconds. With ShardEndWithRecords (the default) the
// response that returns the last records of a closed shard already carries
// the end. MillisBehindLatest is the age of the oldest record not yet returned
// (0 when the reader is at the tip).

type getRecordsInput struct {
	ShardIterator string
	Limit         *int
	StreamARN     string
}

const (
	getRecordsMaxLimit = 10000
	getRecordsMaxBytes = 10 * mib
)

func (s *Server) getRecords(c *call) (any, error) {
	var in getRecordsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	limit := getRecordsMaxLimit
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > getRecordsMaxLimit {
			return nil, errf(CodeValidation, "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10000", *in.Limit)
		}
		limit = *in.Limit
	}
	if in.ShardIterator == "" {
		return nil, errf(CodeValidation, "1 validation error detected: Value null at 'shardIterator' failed to satisfy constraint: Member must not be null")
	}
	it, ok := s.openIterator(in.ShardIterator)
	if !ok {
		return nil, errf(CodeInvalidArgument, "Invalid ShardIterator.")
	}

	var (
		res  readResult
		next string
	)
	err := s.doErr(func(st *state, now time.Time) *apiError {
		if age := now.Sub(it.issued); age > st.s.cfg.iteratorLifetime {
			return errf(CodeExpiredIterator, "Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of %d milliseconds.",
				it.issued.UTC().Format(time.RFC1123), now.UTC().Format(time.RFC1123), st.s.cfg.iteratorLifetime.Milliseconds())
		}
		sm := st.bySerial[it.streamSerial]
		if sm == nil {
			return errf(CodeResourceNotFound, "The stream of this shard iterator under account %s no longer exists.", st.s.cfg.acct)
		}
		if _, err := st.readableStream(streamRef{Name: sm.name}, now); err != nil {
			return err
		}
		if in.StreamARN != "" && in.StreamARN != sm.arn {
			return errf(CodeInvalidArgument, "ShardIterator belongs to another stream than %s.", in.StreamARN)
		}
		sh := sm.shards[it.shardIndex]
		if st.s.cfg.quotas {
			key := "GetRecords/" + sm.name + "/" + sh.id
			calls := st.bucketFor(key, getRecordsTPS, getRecordsTPS, now)
			bytes := st.bucketFor(key+"/bytes", getRecordsBytesPS, getRecordsBytesPS, now)
			if !bytes.positive(now) || !calls.take(now, 1) {
				return errf(CodeProvisionedThroughput, "Rate exceeded for shard %s in stream %s under account %s.", sh.id, sm.name, st.s.cfg.acct)
			}
			res = sh.read(it.pos, limit, getRecordsMaxBytes, st.s.cfg.shardEndWithRecords, now)
			bytes.charge(now, float64(res.bytes))
		} else {
			res = sh.read(it.pos, limit, getRecordsMaxBytes, st.s.cfg.shardEndWithRecords, now)
		}
		if !res.atEnd {
			next = s.sealIterator(iterator{streamSerial: sm.serial, shardIndex: sh.index, pos: res.next, issued: now})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	b := make([]byte, 0, recordsJSONSize(res.records)+len(next)+256)
	b = append(b, `{"Records":`...)
	b = appendRecords(b, res.records)
	if next != "" {
		b = append(b, `,"NextShardIterator":"`...)
		b = append(b, next...)
		b = append(b, '"')
	}
	b = append(b, `,"MillisBehindLatest":`...)
	b = strconv.AppendInt(b, res.millis, 10)
	if res.atEnd {
		b = append(b, `,"ChildShards":`...)
		b = appendChildShards(b, res.children)
	}
	b = append(b, '}')
	return rawJSON(b), nil
}
