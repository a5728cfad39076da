package read

import (
	"fmt"
	"strconv"
	"sync/atomic"
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
	meta            metaCache
	metrics         *Metrics
	log             shardLog
	deaggregate     bool
	keys            keyCheck
	// skip: when resuming inside an aggregated record, the user records up
	// to and including skip.sub of record skip.seq were already
	// acknowledged.
	skip struct {
		seq string
		sub uint64
	}

	unpacker kpl.Unpacker
	// open is the aggregate whose user records are being converted, when a
	// part ended inside it.
	open openAggregate

	positions []checkpoint.Position // of the messages of the last convertPart

	emptySeen bool // an aggregate of no user records was said at WARN
}

// metaCache holds the metadata values every message of a shard shares,
// boxed once, and the last arrival time formatted, reused while records
// share it (all user records of an aggregate do).
type metaCache struct {
	stream, shard any
	arrivalAt     time.Time
	arrival       any
}

// keyCheck checks the hash keys of an aggregate's user records against the
// shard's range. A user record whose hash key lies outside it is delivered
// all the same, flagged: a Kinesis record is stored in one shard only, so no
// other shard has it. Aggregators other than the KPL mix keys in one
// aggregate, and any aggregate read after a reshard may hold keys of a
// sibling shard. Range unknown: nothing is flagged.
type keyCheck struct {
	hashRange kpl.HashKeyRange
	known     bool
	// auto is set while the stream places records itself: nothing is
	// checked then (see placement.go).
	auto *atomic.Bool
	// outOfRange is told of the first user record out of the shard's range
	// (to warn once per shard) and counts every one.
	outOfRange func(seq string, sub uint64, key string)
}

// openAggregate is an aggregated record checked whole whose user records are
// converted a part at a time: however many user records one Kinesis record
// holds (a crafted one of 1 MiB holds 166,650 empty ones), the converter holds
// messages for one part only.
type openAggregate struct {
	rec     *types.Record // of the read being converted; nil: none is open
	agg     kpl.Unpacked
	seq     string
	seqMeta any // seq boxed once, shared by the user records' messages
	next    int // the index (sub-sequence number) of the next user record
}

// bigIndex is the most user records whose index the converter's Unpacker
// keeps for the next aggregate (16 bytes each); a larger one is let go once
// converted, so that a shard that read one crafted aggregate does not hold
// its index for good.
const bigIndex = 4096

func newConverter(s *Stream, log shardLog, info shardInfo, resume *checkpoint.Position) *converter {
	c := &converter{
		stream: s.conf.Name, shardID: info.id, meta: metaCache{stream: s.conf.Name, shard: info.id},
		metrics: s.env.Metrics, log: log, deaggregate: s.env.Limits.Deaggregate,
	}
	if info.hashLow != "" && info.hashHigh != "" {
		if r, err := kpl.ParseHashKeyRange(info.hashLow, info.hashHigh); err == nil {
			c.keys.hashRange, c.keys.known = r, true
		} else {
			c.log.Warnf("hash key range %s-%s: %v; user records of aggregates are not checked against it", info.hashLow, info.hashHigh, err)
		}
	}
	c.keys.auto = &s.placement.auto
	c.keys.outOfRange = func(seq string, sub uint64, key string) {
		c.metrics.outOfRange.Incr(1, c.stream, c.shardID)
		if s.warnOutOfRange(info.id) {
			c.log.Warnf("user record %d of aggregate %s has hash key %s, outside the shard's range %s-%s: its producer mixes keys of several shards in one aggregate (as the kinesis-aggregation libraries do). Such records are delivered all the same, with metadata %s: true; this is said once per shard",
				sub, seq, key, info.hashLow, info.hashHigh, metaOutOfRange)
		}
	}
	if resume != nil && resume.Partial {
		c.skip.seq, c.skip.sub = resume.Sequence, uint64(resume.SubSequence)
	}
	return c
}

// takePositions hands over the positions of the last convertPart, which the
// converter then forgets.
func (c *converter) takePositions() []checkpoint.Position {
	p := c.positions
	c.positions = nil
	return p
}

// convertPart converts the records of b from index from on, stopping once
// the messages reach max. It returns the messages, the position of the last
// one, their number, and next: the index of the record to go on with, or
// len(b.Records) when none is left. A part may end inside an aggregate: next
// is then that record's index, and the converter goes on from its next user
// record when called again with b and next, so that a read converted part by
// part holds messages for one part at a time, however many user records its
// aggregates hold. c.positions holds each message's position.
func (c *converter) convertPart(b shard.Batch, from, max int) (msgs service.MessageBatch, last checkpoint.Position, n, next int) {
	msgs = make(service.MessageBatch, 0, min(max, len(b.Records)-from))
	// A slice of its own for each part: a reader between reads keeps none
	// (their sequence numbers would keep the read's strings).
	c.positions = make([]checkpoint.Position, 0, min(max, len(b.Records)-from))
	var millis any = strconv.FormatInt(b.MillisBehindLatest, 10)
	var bytes int64
	i := from
	for ; i < len(b.Records) && len(msgs) < max; i++ {
		rec := &b.Records[i]
		if c.open.rec != rec {
			if c.open.rec != nil {
				c.open = openAggregate{} // one of a read given up (its reader stops)
			}
			var done bool
			if msgs, done = c.start(msgs, rec, millis); done {
				bytes += int64(len(rec.Data))
				continue
			}
		}
		msgs = c.userRecords(msgs, max, millis)
		if c.open.rec != nil {
			break // the part is full inside the aggregate
		}
		bytes += int64(len(rec.Data))
	}
	// A record counts as read once every message of it is converted.
	c.metrics.recordsRead.Incr(int64(i-from), c.stream, c.shardID)
	c.metrics.bytesRead.Incr(bytes, c.stream, c.shardID)
	if len(msgs) == 0 {
		return nil, checkpoint.Position{}, 0, i
	}
	return msgs, c.positions[len(c.positions)-1], len(msgs), i
}

// start converts rec, a record not converted before, and reports done; or,
// for a sound aggregate to split, opens it and reports not done, for
// userRecords to convert.
func (c *converter) start(msgs service.MessageBatch, rec *types.Record, millis any) (_ service.MessageBatch, done bool) {
	seq := aws.ToString(rec.SequenceNumber)
	skip, skipSub := false, uint64(0)
	if c.skip.seq != "" {
		switch shard.CompareSequence(seq, c.skip.seq) {
		case 0:
			skip, skipSub = true, c.skip.sub
			c.skip.seq = ""
		case 1:
			c.skip.seq = ""
		}
	}
	aggregated := kpl.IsAggregated(rec.Data)
	if c.deaggregate && aggregated {
		agg, _, err := c.unpacker.Open(rec.Data)
		if err != nil {
			// A corrupt aggregate is delivered whole, flagged with an error,
			// never dropped.
			c.log.Warnf("record %s is a corrupt KPL aggregate (%v): delivered as it is, flagged with an error", seq, err)
			m := c.message(rec, rec.Data, aws.ToString(rec.PartitionKey), any(seq), millis)
			m.MetaSetMut(metaDeaggError, err.Error())
			m.SetError(fmt.Errorf("kinesis record %s of shard %s: %w", seq, c.shardID, err))
			c.positions = append(c.positions, checkpoint.Position{Sequence: seq})
			return append(msgs, m), true
		}
		if agg.Len() == 0 {
			// Sound, and holding nothing to deliver: said, once a shard
			// at WARN (a producer that sends such records sends many).
			say := c.log.Debugf
			if !c.emptySeen {
				c.emptySeen, say = true, c.log.Warnf
			}
			say("record %s is a KPL aggregate of no user records: nothing to deliver (its producer sent an empty aggregate; later ones of this shard are logged at DEBUG)", seq)
			return msgs, true
		}
		c.open = openAggregate{rec: rec, agg: agg, seq: seq, seqMeta: seq}
		if skip {
			// Resuming inside it: its user records up to skipSub were
			// acknowledged.
			c.open.next = int(min(skipSub+1, uint64(agg.Len())))
		}
		return msgs, false
	}
	if skip && !aggregated {
		// A position inside a record that is no aggregate (one imported
		// from KCL, which counts a plain record as user record 0): the
		// record itself was processed. An aggregate read whole is
		// delivered again, as its rest was not.
		return msgs, true
	}
	msgs = append(msgs, c.message(rec, rec.Data, aws.ToString(rec.PartitionKey), any(seq), millis))
	c.positions = append(c.positions, checkpoint.Position{Sequence: seq})
	return msgs, true
}

// userRecords appends messages of the open aggregate's user records until
// the messages reach max or the aggregate is done; then it closes it.
func (c *converter) userRecords(msgs service.MessageBatch, max int, millis any) service.MessageBatch {
	o := &c.open
	last := o.agg.Len() - 1
	for ; o.next <= last && len(msgs) < max; o.next++ {
		u := o.agg.Record(o.next)
		m := c.message(o.rec, u.Data, u.PartitionKey, o.seqMeta, millis)
		m.MetaSetMut(metaSubSequence, strconv.FormatUint(u.SubSequence, 10))
		if c.keys.known && !c.keys.auto.Load() {
			if hk, err := u.HashKey(); err == nil && !c.keys.hashRange.Contains(hk) {
				m.MetaSetMut(metaOutOfRange, true)
				c.keys.outOfRange(o.seq, u.SubSequence, hk.String())
			}
		}
		if u.ExplicitHashKey != "" {
			m.MetaSetMut(metaExplicitHashKey, u.ExplicitHashKey)
		}
		msgs = append(msgs, m)
		c.positions = append(c.positions, checkpoint.Position{Sequence: o.seq, SubSequence: int64(u.SubSequence), Partial: o.next < last})
	}
	if o.next > last {
		if o.agg.Len() > bigIndex {
			c.unpacker = kpl.Unpacker{}
		}
		c.open = openAggregate{}
	}
	return msgs
}

func (c *converter) message(rec *types.Record, data []byte, partitionKey string, seq, millis any) *service.Message {
	m := service.NewMessage(data)
	m.MetaSetMut(metaStream, c.meta.stream)
	m.MetaSetMut(metaShard, c.meta.shard)
	m.MetaSetMut(metaPartitionKey, partitionKey)
	m.MetaSetMut(metaSequence, seq)
	if at := rec.ApproximateArrivalTimestamp; at != nil {
		if !at.Equal(c.meta.arrivalAt) || c.meta.arrival == nil {
			c.meta.arrivalAt, c.meta.arrival = *at, at.UTC().Format(time.RFC3339Nano)
		}
		m.MetaSetMut(metaArrival, c.meta.arrival)
	}
	m.MetaSetMut(metaMillisBehind, millis)
	return m
}
