package input

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Metadata keys set on messages.
const (
	metaStream          = "kinesis_stream"
	metaShard           = "kinesis_shard"
	metaPartitionKey    = "kinesis_partition_key"
	metaExplicitHashKey = "kinesis_explicit_hash_key"
	metaSequence        = "kinesis_sequence_number"
	metaSubSequence     = "kinesis_sub_sequence_number"
	metaArrival         = "kinesis_arrival_timestamp"
	metaMillisBehind    = "kinesis_millis_behind_latest"
	metaDeaggError      = "kinesis_deaggregation_error"
	metaOutOfRange      = "kinesis_hash_key_out_of_range"
)

// converter turns the Kinesis records of one shard into Benthos messages and
// their positions, splitting KPL aggregated records into their user records.
type converter struct {
	stream, shardID string
	// The metadata values every message of the shard shares, boxed once.
	streamMeta, shardMeta any
	// The last arrival time formatted, reused while records share it (all
	// user records of an aggregate do).
	arrivalAt   time.Time
	arrivalMeta any
	metrics     *metrics
	log         *service.Logger
	deaggregate bool

	// hashRange is the shard's hash key range. A user record of an aggregate
	// whose hash key lies outside it is delivered all the same, flagged: a
	// Kinesis record is stored in one shard only, so no other shard has it.
	// Aggregators other than the KPL mix keys in one aggregate, and any
	// aggregate read after a reshard may hold keys of a sibling shard.
	// Unknown: nothing is flagged.
	hashRange    kpl.HashKeyRange
	hasHashRange bool
	// outOfRange is told of the first user record out of the shard's range
	// (to warn once per shard) and counts every one.
	outOfRange func(seq string, sub uint64, key string)

	// skip: when resuming inside an aggregated record, the user records up to
	// and including skipSub of record skipSeq were already acknowledged.
	skipSeq string
	skipSub uint64

	unpacker kpl.Unpacker
	scratch  []kpl.UserRecord

	positions []checkpoint.Position // of the messages of the last convert
}

func newConverter(s *streamReader, info shardInfo, resume *checkpoint.Position) *converter {
	c := &converter{
		stream: s.name, shardID: info.id, streamMeta: s.name, shardMeta: info.id,
		metrics: s.in.metrics, log: s.in.log, deaggregate: s.in.conf.Deaggregate,
	}
	if info.hashLow != "" && info.hashHigh != "" {
		if r, err := kpl.ParseHashKeyRange(info.hashLow, info.hashHigh); err == nil {
			c.hashRange, c.hasHashRange = r, true
		} else {
			c.log.Warnf("stream %s shard %s: hash key range %s-%s: %v; user records of aggregates are not checked against it", s.name, info.id, info.hashLow, info.hashHigh, err)
		}
	}
	c.outOfRange = func(seq string, sub uint64, key string) {
		c.metrics.outOfRange.Incr(1, c.stream, c.shardID)
		if s.warnOutOfRange(info.id) {
			c.log.Warnf("stream %s shard %s: user record %d of aggregate %s has hash key %s, outside the shard's range %s-%s: its producer mixes keys of several shards in one aggregate (as the kinesis-aggregation libraries do). Such records are delivered all the same, with metadata %s: true; this is said once per shard",
				s.name, info.id, sub, seq, key, info.hashLow, info.hashHigh, metaOutOfRange)
		}
	}
	if resume != nil && resume.Partial {
		c.skipSeq, c.skipSub = resume.Sequence, uint64(resume.SubSequence)
	}
	return c
}

// convert returns the messages of b, the position of the last one and the
// number of records they stand for. c.positions holds each message's position.
func (c *converter) convert(b shard.Batch) (service.MessageBatch, checkpoint.Position, int) {
	msgs, last, n, _ := c.convertPart(b, 0, math.MaxInt)
	return msgs, last, n
}

// convertPart is convert of the records of b from index from on, stopping
// after the record that brings the messages to max or more (an aggregate's
// user records are never split over two parts). next is the index of the
// first record left, len(b.Records) when none is: a read converted part by
// part holds messages for one part at a time.
func (c *converter) convertPart(b shard.Batch, from, max int) (msgs service.MessageBatch, last checkpoint.Position, n, next int) {
	msgs = make(service.MessageBatch, 0, min(max, len(b.Records)-from))
	c.positions = c.positions[:0]
	var millis any = strconv.FormatInt(b.MillisBehindLatest, 10)
	var bytes int64
	i := from
	for ; i < len(b.Records) && len(msgs) < max; i++ {
		rec := &b.Records[i]
		seq := aws.ToString(rec.SequenceNumber)
		bytes += int64(len(rec.Data))
		skip, skipSub := false, uint64(0)
		if c.skipSeq != "" {
			switch shard.CompareSequence(seq, c.skipSeq) {
			case 0:
				skip, skipSub = true, c.skipSub
				c.skipSeq = ""
			case 1:
				c.skipSeq = ""
			}
		}
		aggregated := kpl.IsAggregated(rec.Data)
		if c.deaggregate && aggregated {
			msgs = c.unpack(msgs, rec, seq, millis, skip, skipSub)
			continue
		}
		if skip && !aggregated {
			// A position inside a record that is no aggregate (one imported
			// from KCL, which counts a plain record as user record 0): the
			// record itself was processed. An aggregate read whole is
			// delivered again, as its rest was not.
			continue
		}
		msgs = append(msgs, c.message(rec, rec.Data, aws.ToString(rec.PartitionKey), any(seq), millis))
		c.positions = append(c.positions, checkpoint.Position{Sequence: seq})
	}
	c.metrics.recordsRead.Incr(int64(i-from), c.stream, c.shardID)
	c.metrics.bytesRead.Incr(bytes, c.stream, c.shardID)
	if len(msgs) == 0 {
		return nil, checkpoint.Position{}, 0, i
	}
	return msgs, c.positions[len(c.positions)-1], len(msgs), i
}

// unpack appends the user records of an aggregated record. A corrupt
// aggregate is delivered whole, flagged with an error, never dropped.
func (c *converter) unpack(msgs service.MessageBatch, rec *types.Record, seq string, millis any, skip bool, skipSub uint64) service.MessageBatch {
	users, _, err := c.unpacker.Unpack(c.scratch[:0], rec.Data)
	if err != nil {
		c.log.Warnf("stream %s shard %s: record %s is a corrupt KPL aggregate (%v): delivered as it is, flagged with an error", c.stream, c.shardID, seq, err)
		m := c.message(rec, rec.Data, aws.ToString(rec.PartitionKey), any(seq), millis)
		m.MetaSetMut(metaDeaggError, err.Error())
		m.SetError(fmt.Errorf("kinesis record %s of shard %s: %w", seq, c.shardID, err))
		c.positions = append(c.positions, checkpoint.Position{Sequence: seq})
		return append(msgs, m)
	}
	c.scratch = users[:0]
	last := len(users) - 1
	var seqMeta any = seq // shared by the aggregate's user records
	for i := range users {
		u := &users[i]
		if skip && u.SubSequence <= skipSub {
			continue
		}
		m := c.message(rec, u.Data, u.PartitionKey, seqMeta, millis)
		m.MetaSetMut(metaSubSequence, strconv.FormatUint(u.SubSequence, 10))
		if c.hasHashRange {
			if hk, err := u.HashKey(); err == nil && !c.hashRange.Contains(hk) {
				m.MetaSetMut(metaOutOfRange, true)
				c.outOfRange(seq, u.SubSequence, hk.String())
			}
		}
		if u.ExplicitHashKey != "" {
			m.MetaSetMut(metaExplicitHashKey, u.ExplicitHashKey)
		}
		msgs = append(msgs, m)
		c.positions = append(c.positions, checkpoint.Position{Sequence: seq, SubSequence: int64(u.SubSequence), Partial: i < last})
	}
	return msgs
}

func (c *converter) message(rec *types.Record, data []byte, partitionKey string, seq, millis any) *service.Message {
	m := service.NewMessage(data)
	m.MetaSetMut(metaStream, c.streamMeta)
	m.MetaSetMut(metaShard, c.shardMeta)
	m.MetaSetMut(metaPartitionKey, partitionKey)
	m.MetaSetMut(metaSequence, seq)
	if at := rec.ApproximateArrivalTimestamp; at != nil {
		if !at.Equal(c.arrivalAt) || c.arrivalMeta == nil {
			c.arrivalAt, c.arrivalMeta = *at, at.UTC().Format(time.RFC3339Nano)
		}
		m.MetaSetMut(metaArrival, c.arrivalMeta)
	}
	m.MetaSetMut(metaMillisBehind, millis)
	return m
}
