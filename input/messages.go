package input

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Metadata keys set on every message.
const (
	metaStream       = "kinesis_stream"
	metaShard        = "kinesis_shard"
	metaPartitionKey = "kinesis_partition_key"
	metaSequence     = "kinesis_sequence_number"
	metaSubSequence  = "kinesis_sub_sequence_number"
	metaArrival      = "kinesis_arrival_timestamp"
	metaMillisBehind = "kinesis_millis_behind_latest"
)

// converter turns the Kinesis records of one shard into Benthos messages and
// positions.
type converter struct {
	stream, shardID string
	metrics         *metrics

	// skip: when resuming inside an aggregated record, the user records up to
	// and including skipSub of record skipSeq were already acknowledged.
	skipSeq string
	skipSub int64

	positions []checkpoint.Position // of the messages of the last convert
}

func newConverter(s *streamReader, info shardInfo, resume *checkpoint.Position) *converter {
	c := &converter{stream: s.name, shardID: info.id, metrics: s.in.metrics}
	if resume != nil && resume.Partial {
		c.skipSeq, c.skipSub = resume.Sequence, resume.SubSequence
	}
	return c
}

// convert returns the messages of b, the position of the last one and the
// number of records they stand for. c.positions holds each message's position.
func (c *converter) convert(b shard.Batch) (service.MessageBatch, checkpoint.Position, int) {
	msgs := make(service.MessageBatch, 0, len(b.Records))
	c.positions = c.positions[:0]
	millis := strconv.FormatInt(b.MillisBehindLatest, 10)
	var bytes int64
	for i := range b.Records {
		rec := &b.Records[i]
		seq := aws.ToString(rec.SequenceNumber)
		if c.skipSeq != "" {
			if shard.CompareSequence(seq, c.skipSeq) > 0 {
				c.skipSeq = ""
			}
		}
		bytes += int64(len(rec.Data))
		msgs = append(msgs, c.message(rec, rec.Data, seq, millis))
		c.positions = append(c.positions, checkpoint.Position{Sequence: seq})
	}
	c.metrics.recordsRead.Incr(int64(len(b.Records)), c.stream, c.shardID)
	c.metrics.bytesRead.Incr(bytes, c.stream, c.shardID)
	if len(msgs) == 0 {
		return nil, checkpoint.Position{}, 0
	}
	return msgs, c.positions[len(c.positions)-1], len(msgs)
}

func (c *converter) message(rec *types.Record, data []byte, seq, millis string) *service.Message {
	m := service.NewMessage(data)
	m.MetaSetMut(metaStream, c.stream)
	m.MetaSetMut(metaShard, c.shardID)
	m.MetaSetMut(metaPartitionKey, aws.ToString(rec.PartitionKey))
	m.MetaSetMut(metaSequence, seq)
	if rec.ApproximateArrivalTimestamp != nil {
		m.MetaSetMut(metaArrival, rec.ApproximateArrivalTimestamp.UTC().Format(time.RFC3339Nano))
	}
	m.MetaSetMut(metaMillisBehind, millis)
	return m
}
