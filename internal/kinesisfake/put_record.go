package kinesisfake

import (
	"time"
	"unicode/utf8"
)

// Behavior: PutRecord.
//
// AWS hashes the partition key with MD5 to a 128-bit hash key (or takes
// ExplicitHashKey), stores the record in the open shard owning that key with
// a sequence number above every earlier one of the shard and an
// ApproximateArrivalTimestamp, and returns the shard id and sequence number.
// Data is at most the stream's MaxRecordSizeInKiB (1 MiB by default, 10 MiB
// at most), the partition key 1 to 256 characters (ValidationException
// otherwise). An AUTO stream ignores the keys and places the record itself
// (see stream_props.go). With write quotas a shard takes 1,000 records and 1
// MiB per second (ProvisionedThroughputExceededException beyond).
// The fake does the same; write quotas are off unless WriteQuotas(true).
// SequenceNumberForOrdering is accepted and ignored: sequence numbers always
// grow within a shard here.

type putRecordInput struct {
	StreamName                string
	StreamARN                 string
	Data                      []byte
	PartitionKey              string
	ExplicitHashKey           *string
	SequenceNumberForOrdering string
}

type putRecordOutput struct {
	ShardId        string
	SequenceNumber string
	EncryptionType string
}

// maxRecordSize is the largest record data the API takes at all; each
// stream takes at most its MaxRecordSizeInKiB.
const maxRecordSize = maxRecordKiB << 10

func (s *Server) putRecord(c *call) (any, error) {
	var in putRecordInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := validRecord("", in.PartitionKey, in.Data, in.ExplicitHashKey); err != nil {
		return nil, err
	}
	var out putRecordOutput
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.readableStream(streamRef{in.StreamName, in.StreamARN}, now)
		if err != nil {
			return err
		}
		if err := sm.checkRecordSize("", in.Data); err != nil {
			return err
		}
		sh, rec, err := st.put(sm, in.PartitionKey, in.ExplicitHashKey, in.Data, now, st.s.cfg.writeQuotas)
		if err != nil {
			return err
		}
		out = putRecordOutput{ShardId: sh.id, SequenceNumber: rec.seq, EncryptionType: "NONE"}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// validRecord checks a record's fields against the API's constraints; prefix
// names the entry in error messages (e.g. "records.3.member.").
func validRecord(prefix, pk string, data []byte, explicit *string) *apiError {
	if n := utf8.RuneCountInString(pk); n < 1 || n > 256 {
		return errf(CodeValidation, "1 validation error detected: Value '%s' at '%spartitionKey' failed to satisfy constraint: Member must have length between 1 and 256", pk, prefix)
	}
	if len(data) > maxRecordSize {
		return errf(CodeValidation, "1 validation error detected: Value at '%sdata' failed to satisfy constraint: Member must have length less than or equal to %d", prefix, maxRecordSize)
	}
	if explicit != nil {
		if _, ok := parseHashKey(*explicit); !ok {
			return errf(CodeInvalidArgument, "Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. Specified value was %s", *explicit)
		}
	}
	return nil
}

// put stores one record. With quotas it charges the shard's write budget and
// answers ProvisionedThroughputExceededException when it is spent.
func (st *state) put(sm *stream, pk string, explicit *string, data []byte, now time.Time, quotas bool) (*shard, *record, *apiError) {
	sh, err := st.placeRecord(sm, pk, explicit)
	if err != nil {
		return nil, nil, err
	}
	if quotas {
		size := float64(len(data) + len(pk))
		recs := st.bucketFor("PutRecords/"+sh.stream.name+"/"+sh.id, putRecordsPS, putRecordsPS, now)
		bytes := st.bucketFor("PutBytes/"+sh.stream.name+"/"+sh.id, putBytesPS, putBytesPS, now)
		// The byte budget may go into debt, so that a 1 MiB record fits.
		if !bytes.positive(now) || !recs.take(now, 1) {
			return nil, nil, writeThrottled(st, sh)
		}
		bytes.charge(now, size)
	}
	return sh, st.appendRecord(sh, pk, data, now), nil
}

// placeRecord picks the open shard a record goes to: the one owning its hash
// key, or on an AUTO stream the next in turn.
func (st *state) placeRecord(sm *stream, pk string, explicit *string) (*shard, *apiError) {
	if sm.props.distribution == distributionAuto {
		if sh := sm.autoShard(); sh != nil {
			return sh, nil
		}
		return nil, errf(CodeInternalFailure, "No open shard in stream %s.", sm.name)
	}
	var k hashKey
	if explicit != nil {
		var ok bool
		if k, ok = parseHashKey(*explicit); !ok {
			return nil, errf(CodeInvalidArgument, "Invalid ExplicitHashKey %s.", *explicit)
		}
	} else {
		k = partitionHash(pk)
	}
	sh := sm.shardFor(k)
	if sh == nil {
		return nil, errf(CodeInternalFailure, "No open shard owns hash key %s in stream %s.", k, sm.name)
	}
	return sh, nil
}

func writeThrottled(st *state, sh *shard) *apiError {
	return errf(CodeProvisionedThroughput, "Rate exceeded for shard %s in stream %s under account %s.", sh.id, sh.stream.name, st.s.cfg.acct)
}
