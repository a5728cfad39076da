package kinesisfake

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// epochTime is a timestamp on the wire: epoch seconds with a millisecond
// fraction.
type epochTime struct{ time.Time }

func (t epochTime) MarshalJSON() ([]byte, error) { return appendEpoch(nil, t.Time), nil }

func (t *epochTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		var s string
		if jerr := json.Unmarshal(b, &s); jerr != nil {
			return err
		}
		tt, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			return perr
		}
		t.Time = tt
		return nil
	}
	sec, frac := math.Modf(f)
	t.Time = time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond))
	return nil
}

func appendEpoch(b []byte, t time.Time) []byte {
	ms := t.UnixMilli()
	b = strconv.AppendInt(b, ms/1000, 10)
	frac := ms % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

// Output shapes shared by several operations.

type hashKeyRangeJSON struct {
	StartingHashKey string
	EndingHashKey   string
}

type seqRangeJSON struct {
	StartingSequenceNumber string
	EndingSequenceNumber   string `json:",omitempty"`
}

type shardJSON struct {
	ShardId               string
	ParentShardId         string `json:",omitempty"`
	AdjacentParentShardId string `json:",omitempty"`
	HashKeyRange          hashKeyRangeJSON
	SequenceNumberRange   seqRangeJSON
}

func (sh *shard) toJSON() shardJSON {
	return shardJSON{
		ShardId:               sh.id,
		ParentShardId:         sh.parent,
		AdjacentParentShardId: sh.adjacentParent,
		HashKeyRange:          hashKeyRangeJSON{sh.startStr, sh.endStr},
		SequenceNumberRange:   seqRangeJSON{sh.startSeq, sh.endSeq},
	}
}

type consumerJSON struct {
	ConsumerName              string
	ConsumerARN               string
	ConsumerStatus            string
	ConsumerCreationTimestamp epochTime
	StreamARN                 string `json:",omitempty"`
}

func (c *consumer) toJSON(now time.Time, withStream bool) consumerJSON {
	out := consumerJSON{
		ConsumerName:              c.name,
		ConsumerARN:               c.arn,
		ConsumerStatus:            c.status(now),
		ConsumerCreationTimestamp: epochTime{c.created},
	}
	if withStream {
		out.StreamARN = c.stream.arn
	}
	return out
}

// The records array is written by hand: it is the hot path of GetRecords and
// SubscribeToShard, and reflection would cost more than the rest of the
// request.

// recordsJSONSize estimates the encoded size of recs, to size buffers once.
func recordsJSONSize(recs []record) int {
	n := 16
	for i := range recs {
		n += 128 + base64.StdEncoding.EncodedLen(len(recs[i].data)) + len(recs[i].pk) + len(recs[i].seq)
	}
	return n
}

func appendRecords(b []byte, recs []record) []byte {
	b = append(b, '[')
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		r := &recs[i]
		b = append(b, `{"SequenceNumber":"`...)
		b = append(b, r.seq...)
		b = append(b, `","ApproximateArrivalTimestamp":`...)
		b = appendEpoch(b, r.arrival)
		b = append(b, `,"Data":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.data)
		b = append(b, `","PartitionKey":`...)
		b = appendJSONString(b, r.pk)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendChildShards(b []byte, children []*shard) []byte {
	b = append(b, '[')
	for i, ch := range children {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"ShardId":`...)
		b = appendJSONString(b, ch.id)
		b = append(b, `,"ParentShards":[`...)
		for j, p := range ch.parents() {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p)
		}
		b = append(b, `],"HashKeyRange":{"StartingHashKey":"`...)
		b = append(b, ch.startStr...)
		b = append(b, `","EndingHashKey":"`...)
		b = append(b, ch.endStr...)
		b = append(b, `"}}`...)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
