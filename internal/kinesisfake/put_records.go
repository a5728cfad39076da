package kinesisfake

import (
	"strconv"
	"time"
)

// Behavior: PutRecords.
//
// AWS stores up to 500 records (at most 10 MiB in all, since the 10 MiB
// records of 2025; 5 MiB before) as PutRecord would, each
// on its own: the response lists, in request order, a shard id and sequence
// number or an ErrorCode and ErrorMessage per record, and FailedRecordCount.
// A constraint violated by any entry fails the whole request. With write
// quotas, entries over a shard's budget fail with
// ProvisionedThroughputExceededException while the others succeed. The fake
// does the same; Throttled("PutRecords") counts failed entries.

type putRecordsInput struct {
	StreamName string
	StreamARN  string
	Records    []struct {
		Data            []byte
		PartitionKey    string
		ExplicitHashKey *string
	}
}

type putRecordsEntryJSON struct {
	SequenceNumber string `json:",omitempty"`
	ShardId        string `json:",omitempty"`
	ErrorCode      string `json:",omitempty"`
	ErrorMessage   string `json:",omitempty"`
}

type putRecordsOutput struct {
	FailedRecordCount int
	Records           []putRecordsEntryJSON
	EncryptionType    string
}

const (
	maxPutRecordsEntries = 500
	maxPutRecordsBytes   = 10 * mib
)

func (s *Server) putRecords(c *call) (any, error) {
	var in putRecordsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if n := len(in.Records); n < 1 || n > maxPutRecordsEntries {
		return nil, errf(CodeValidation, "1 validation error detected: Value at 'records' failed to satisfy constraint: Member must have length between 1 and 500")
	}
	total := 0
	for i, r := range in.Records {
		if err := validRecord("records."+strconv.Itoa(i+1)+".member.", r.PartitionKey, r.Data, r.ExplicitHashKey); err != nil {
			return nil, err
		}
		total += len(r.Data) + len(r.PartitionKey)
	}
	if total > maxPutRecordsBytes {
		return nil, errf(CodeInvalidArgument, "Records size exceeds 10 MB limit")
	}
	out := putRecordsOutput{Records: make([]putRecordsEntryJSON, len(in.Records)), EncryptionType: "NONE"}
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.readableStream(streamRef{in.StreamName, in.StreamARN}, now)
		if err != nil {
			return err
		}
		for i, r := range in.Records {
			if err := sm.checkRecordSize("records."+strconv.Itoa(i+1)+".member.", r.Data); err != nil {
				return err
			}
		}
		for i, r := range in.Records {
			sh, rec, err := st.put(sm, r.PartitionKey, r.ExplicitHashKey, r.Data, now, st.s.cfg.writeQuotas)
			if err != nil {
				out.Records[i] = putRecordsEntryJSON{ErrorCode: err.code, ErrorMessage: err.msg}
				out.FailedRecordCount++
				continue
			}
			out.Records[i] = putRecordsEntryJSON{SequenceNumber: rec.seq, ShardId: sh.id}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out.FailedRecordCount > 0 {
		s.stats.throttle("PutRecords", out.FailedRecordCount)
	}
	return out, nil
}
