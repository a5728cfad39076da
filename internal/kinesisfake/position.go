package kinesisfake

import (
	"sort"
	"time"
)

// Starting positions, shared by GetShardIterator (ShardIteratorType) and
// SubscribeToShard (StartingPosition.Type).
const (
	posTrimHorizon   = "TRIM_HORIZON"
	posLatest        = "LATEST"
	posAtTimestamp   = "AT_TIMESTAMP"
	posAtSequence    = "AT_SEQUENCE_NUMBER"
	posAfterSequence = "AFTER_SEQUENCE_NUMBER"
)

// startPos returns the index in sh.records where a reader starting at the
// given position begins, never before the trim horizon (see retention.go). op
// and seqField name the operation and the request field for error messages.
func startPos(sh *shard, typ, seq string, ts *epochTime, op, seqField string) (int, *apiError) {
	switch typ {
	case posTrimHorizon:
		return sh.trimmed, nil
	case posLatest:
		return len(sh.records), nil
	case posAtTimestamp:
		if ts == nil || ts.IsZero() {
			return 0, errf(CodeInvalidArgument, "Must specify timestampInMillis parameter for iterator of type AT_TIMESTAMP. Current request has no timestamp parameter.")
		}
		t := ts.Time
		return max(sh.trimmed, sort.Search(len(sh.records), func(i int) bool { return !sh.records[i].arrival.Before(t) })), nil
	case posAtSequence, posAfterSequence:
		if seq == "" {
			return 0, errf(CodeInvalidArgument, "Must specify %s for iterator of type %s.", seqField, typ)
		}
		if !validSeqSyntax(seq) {
			return 0, errf(CodeValidation, "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: 0|([1-9]\\d{0,128})", seq, seqField)
		}
		p, ok := parseSeq(seq)
		if !ok {
			return 0, errf(CodeInvalidArgument, "Invalid %s %s for shard %s in stream %s.", seqField, seq, sh.id, sh.stream.name)
		}
		if p.streamSerial != sh.stream.serial || p.shardIndex != sh.index {
			return 0, errf(CodeInvalidArgument, "Invalid %s. It encodes %s, while it was used in a call to a shard with %s", seqField, shardIDFor(p.shardIndex), sh.id)
		}
		if sh.pastHorizon(p.counter, typ == posAfterSequence) {
			return 0, errf(CodeInvalidArgument, "StartingSequenceNumber %s used in %s on shard %s in stream %s is invalid: it is older than the stream's retention period (trimmed).",
				seq, op, sh.id, sh.stream.arn)
		}
		if typ == posAtSequence {
			return sort.Search(len(sh.records), func(i int) bool { return sh.records[i].counter >= p.counter }), nil
		}
		return sort.Search(len(sh.records), func(i int) bool { return sh.records[i].counter > p.counter }), nil
	}
	return 0, errf(CodeValidation, "1 validation error detected: Value '%s' at 'shardIteratorType' failed to satisfy constraint: Member must satisfy enum value set: [AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, LATEST, AT_TIMESTAMP]", typ)
}

// readResult is what a read of a shard from a position returns, for
// GetRecords and SubscribeToShard alike.
type readResult struct {
	records  []record // shared with the shard: read-only
	next     int      // position after the records
	atEnd    bool     // the shard is closed and next is its end
	children []*shard // when atEnd
	millis   int64    // MillisBehindLatest
	cont     string   // sequence number after which reading resumes at next
	bytes    int      // record bytes in records
}

// read takes up to maxRecs records (at least one if any) of at most maxBytes
// from pos. The returned slice aliases the shard's records, which are never
// modified once appended, so it can be encoded outside the state goroutine.
//
// A position among trimmed records reads from the oldest record left.
func (sh *shard) read(pos, maxRecs, maxBytes int, endWithRecords bool, now time.Time) readResult {
	n := len(sh.records)
	pos = min(max(pos, sh.trimmed), n)
	end, size := pos, 0
	for end < n && end-pos < maxRecs {
		rs := sh.records[end].size()
		if end > pos && size+rs > maxBytes {
			break
		}
		size += rs
		end++
	}
	res := readResult{records: sh.records[pos:end:end], next: end, bytes: size}
	if sh.closed && end == n && (end == pos || endWithRecords) {
		res.atEnd = true
		res.children = sh.children
	} else if end > 0 {
		res.cont = sh.records[end-1].seq
	} else {
		res.cont = sh.startSeq
	}
	if end < n {
		res.millis = max(0, now.Sub(sh.records[end].arrival).Milliseconds())
	}
	return res
}
