// Package recordjson decodes the JSON documents that carry Kinesis records, a
// GetRecords response and a SubscribeToShard event, into the SDK's types in
// a handful of allocations per document: one slab for every record's data,
// one string for every sequence number and partition key, one array each of
// records and arrival times. The SDK's own decoding allocates several times
// per record and reads a response into a buffer grown by doubling; at
// 10,000 records a read that is what a backlog drain's memory is made of.
//
// The documents are what Kinesis sends under the awsJson1.1 protocol: record
// data in standard base64, arrival times in epoch seconds, converted as the
// SDK converts them (to the millisecond, truncated).
package recordjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Document is what a GetRecords response or a SubscribeToShard event holds.
type Document struct {
	Records                    []types.Record
	ChildShards                []types.ChildShard
	MillisBehindLatest         *int64
	NextShardIterator          *string // GetRecords
	ContinuationSequenceNumber *string // SubscribeToShard
}

// Decode decodes the JSON document p. The result shares no memory with p.
func Decode(p []byte) (Document, error) {
	d := decoder{p: p}
	doc, err := d.document()
	if err != nil {
		return Document{}, fmt.Errorf("kinesis records document: %w", err)
	}
	return doc, nil
}

type decoder struct {
	p []byte
	i int

	// While records are read: each record's raw data (a slice of p, or of
	// an unescaped copy) and its string fields' spans in arena.
	raw   [][]byte
	spans []int32 // per record: sequence number start, end, partition key start, end (-1: absent)
	arena []byte
	times []time.Time
}

func (d *decoder) fail(want string) error {
	if d.i >= len(d.p) {
		return fmt.Errorf("unexpected end of JSON at byte %d: expected %s", d.i, want)
	}
	return fmt.Errorf("malformed JSON at byte %d (%q): expected %s", d.i, d.p[d.i], want)
}

func (d *decoder) space() {
	for d.i < len(d.p) {
		switch d.p[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// consume skips spaces and the byte c, reporting whether it was there.
func (d *decoder) consume(c byte) bool {
	d.space()
	if d.i < len(d.p) && d.p[d.i] == c {
		d.i++
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool {
	d.space()
	if bytes.HasPrefix(d.p[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// str reads a string. Without escapes it is a slice of p; with escapes, a
// copy unescaped by encoding/json (rare: Kinesis escapes none of what it
// sends but partition keys chosen so).
func (d *decoder) str() ([]byte, error) {
	d.space()
	if d.i >= len(d.p) || d.p[d.i] != '"' {
		return nil, d.fail("a string")
	}
	start := d.i + 1
	escaped := false
	for j := start; j < len(d.p); j++ {
		switch d.p[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			d.i = j + 1
			if !escaped {
				return d.p[start:j], nil
			}
			var s string
			if err := json.Unmarshal(d.p[start-1:j+1], &s); err != nil {
				return nil, fmt.Errorf("string at byte %d: %w", start-1, err)
			}
			return []byte(s), nil
		}
	}
	d.i = len(d.p)
	return nil, d.fail("the end of a string")
}

// number reads the raw text of a number.
func (d *decoder) number() ([]byte, error) {
	d.space()
	start := d.i
	for d.i < len(d.p) {
		c := d.p[d.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.i++
			continue
		}
		break
	}
	if d.i == start {
		return nil, d.fail("a number")
	}
	return d.p[start:d.i], nil
}

// skip skips any value.
func (d *decoder) skip() error {
	d.space()
	if d.i >= len(d.p) {
		return d.fail("a value")
	}
	switch c := d.p[d.i]; {
	case c == '"':
		_, err := d.str()
		return err
	case c == '{' || c == '[':
		depth := 0
		for d.i < len(d.p) {
			switch d.p[d.i] {
			case '"':
				if _, err := d.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			d.i++
			if depth == 0 {
				return nil
			}
		}
		return d.fail("the end of an object or array")
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(d.p[d.i:], []byte(lit)) {
				d.i += len(lit)
				return nil
			}
		}
		return d.fail("a value")
	default:
		_, err := d.number()
		return err
	}
}

// object calls field for each key of an object; field reads the value.
func (d *decoder) object(field func(key []byte) error) error {
	if !d.consume('{') {
		return d.fail("an object")
	}
	if d.consume('}') {
		return nil
	}
	for {
		key, err := d.str()
		if err != nil {
			return err
		}
		if !d.consume(':') {
			return d.fail("':'")
		}
		if err := field(key); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return nil
		}
		return d.fail("',' or '}'")
	}
}

func (d *decoder) document() (Document, error) {
	var doc Document
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "Records":
			recs, err := d.records()
			doc.Records = recs
			return err
		case "ChildShards":
			start := d.i
			if err := d.skip(); err != nil {
				return err
			}
			return json.Unmarshal(d.p[start:d.i], (*childShards)(&doc.ChildShards))
		case "MillisBehindLatest":
			if d.null() {
				return nil
			}
			raw, err := d.number()
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				return fmt.Errorf("MillisBehindLatest %q: %w", raw, err)
			}
			doc.MillisBehindLatest = &n
		case "NextShardIterator", "ContinuationSequenceNumber":
			if d.null() {
				return nil
			}
			s, err := d.str()
			if err != nil {
				return err
			}
			v := string(s)
			if key[0] == 'N' {
				doc.NextShardIterator = &v
			} else {
				doc.ContinuationSequenceNumber = &v
			}
		default:
			return d.skip()
		}
		return nil
	})
	if err != nil {
		return Document{}, err
	}
	if d.space(); d.i != len(d.p) {
		return Document{}, d.fail("the end of the document")
	}
	return doc, nil
}

// records reads the array of records: first every field, keeping raw data
// and string spans, then the data decoded into one slab and the strings cut
// from one string.
func (d *decoder) records() ([]types.Record, error) {
	if d.null() {
		return nil, nil
	}
	if !d.consume('[') {
		return nil, d.fail("an array of records")
	}
	n := bytes.Count(d.p[d.i:], []byte(`"SequenceNumber"`)) // a good guess of the count
	recs := make([]types.Record, 0, n)
	d.raw = make([][]byte, 0, n)
	d.spans = make([]int32, 0, 4*n)
	d.times = make([]time.Time, 0, n)
	dataLen := 0
	if !d.consume(']') {
		for {
			var rec types.Record
			var raw []byte
			seq, pk := [2]int32{-1, -1}, [2]int32{-1, -1}
			hasTime := false
			var at time.Time
			err := d.object(func(key []byte) error {
				if d.null() {
					return nil
				}
				switch string(key) {
				case "Data":
					s, err := d.str()
					raw = s
					return err
				case "SequenceNumber", "PartitionKey":
					s, err := d.str()
					if err != nil {
						return err
					}
					span := [2]int32{int32(len(d.arena)), int32(len(d.arena) + len(s))}
					d.arena = append(d.arena, s...)
					if key[0] == 'S' {
						seq = span
					} else {
						pk = span
					}
				case "ApproximateArrivalTimestamp":
					num, err := d.number()
					if err != nil {
						return err
					}
					f, err := strconv.ParseFloat(string(num), 64)
					if err != nil {
						return fmt.Errorf("ApproximateArrivalTimestamp %q: %w", num, err)
					}
					// As the SDK: epoch seconds to whole milliseconds, truncated.
					at, hasTime = time.Unix(0, int64(f*1e3)*int64(time.Millisecond)).UTC(), true
				case "EncryptionType":
					s, err := d.str()
					if err != nil {
						return err
					}
					rec.EncryptionType = encryptionType(s)
				default:
					return d.skip()
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", len(recs), err)
			}
			if hasTime {
				d.times = append(d.times, at)
				rec.ApproximateArrivalTimestamp = &d.times[len(d.times)-1]
			}
			recs = append(recs, rec)
			d.raw = append(d.raw, raw)
			d.spans = append(d.spans, seq[0], seq[1], pk[0], pk[1])
			dataLen += base64.StdEncoding.DecodedLen(len(raw))
			if d.consume(',') {
				continue
			}
			if d.consume(']') {
				break
			}
			return nil, d.fail("',' or ']' in the records")
		}
	}
	if len(recs) == 0 {
		return []types.Record{}, nil
	}

	slab := make([]byte, dataLen)
	off := 0
	for i := range recs {
		w, err := base64.StdEncoding.Decode(slab[off:], d.raw[i])
		if err != nil {
			return nil, fmt.Errorf("record %d: Data is not base64: %w", i, err)
		}
		recs[i].Data = slab[off : off+w : off+w]
		off += w
	}
	arena := string(d.arena)
	strs := make([]string, 0, 2*len(recs))
	for i := range recs {
		sp := d.spans[4*i : 4*i+4]
		if sp[0] >= 0 {
			strs = append(strs, arena[sp[0]:sp[1]])
			recs[i].SequenceNumber = &strs[len(strs)-1]
		}
		if sp[2] >= 0 {
			strs = append(strs, arena[sp[2]:sp[3]])
			recs[i].PartitionKey = &strs[len(strs)-1]
		}
	}
	d.raw, d.spans, d.arena = nil, nil, nil
	return recs, nil
}

func encryptionType(s []byte) types.EncryptionType {
	switch string(s) {
	case "NONE":
		return types.EncryptionTypeNone
	case "KMS":
		return types.EncryptionTypeKms
	}
	return types.EncryptionType(s)
}

// childShards decodes ChildShards, rare (at a shard's end), with
// encoding/json.
type childShards []types.ChildShard

func (c *childShards) UnmarshalJSON(p []byte) error {
	var in []struct {
		ShardId      *string
		ParentShards []string
		HashKeyRange *struct {
			StartingHashKey *string
			EndingHashKey   *string
		}
	}
	if err := json.Unmarshal(p, &in); err != nil {
		return fmt.Errorf("ChildShards: %w", err)
	}
	out := make([]types.ChildShard, len(in))
	for i, s := range in {
		out[i] = types.ChildShard{ShardId: s.ShardId, ParentShards: s.ParentShards}
		if r := s.HashKeyRange; r != nil {
			out[i].HashKeyRange = &types.HashKeyRange{StartingHashKey: r.StartingHashKey, EndingHashKey: r.EndingHashKey}
		}
	}
	*c = out
	return nil
}
