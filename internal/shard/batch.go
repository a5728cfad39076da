package shard

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Batch is what a publisher hands to the input for one read: the records of
// one GetRecords response or one SubscribeToShard event, in shard order.
//
// A batch may hold no records: it still carries MillisBehindLatest, and the
// last batch of a closed shard carries End.
type Batch struct {
	Records []types.Record

	// MillisBehindLatest is how far the read is behind the tip of the shard,
	// as Kinesis reported it with this batch.
	MillisBehindLatest int64

	// End reports that the shard is closed and that every record of it has
	// now been delivered. No batch follows one with End set.
	End bool

	// ChildShards lists the shards that continue a closed shard, as Kinesis
	// reported them at its end. Only set with End; it may be empty when the
	// service did not report them, in which case shard discovery finds them.
	ChildShards []types.ChildShard

	// Room is the bytes of a Room the batch's records hold (see Cost): once
	// the batch is handed to Deliver they are the consumer's, to give back
	// when the records are done with, whatever Deliver returns. 0 without a
	// budget.
	Room int64
}

// Deliver hands a batch to the consumer of a publisher. It blocks while the
// consumer is not ready (this is the publisher's back-pressure) and returns an
// error only when ctx ends or the consumer is shutting down; the publisher then
// stops and returns that error.
type Deliver func(ctx context.Context, b Batch) error

// Room is the memory budget a publisher takes room from before each read
// (membudget.Budget): Take waits for at least min bytes and takes up to
// max; Force takes without waiting what a read brought beyond the room
// taken for it; Give gives room back.
type Room interface {
	Take(ctx context.Context, min, max int64) (int64, error)
	Force(n int64)
	Give(n int64)
}

// RecordOverhead is what a record costs in memory besides its data,
// partition key and sequence number: its decoded form and the message it
// becomes (see cmd/kinesis-bench/BENCHMARKS.md, Memory).
const RecordOverhead = 1024

// Cost is what records cost in memory, in the unit of a Room.
func Cost(recs []types.Record) int64 {
	n := int64(len(recs)) * RecordOverhead
	for i := range recs {
		n += int64(len(recs[i].Data))
		if k := recs[i].PartitionKey; k != nil {
			n += int64(len(*k))
		}
		if s := recs[i].SequenceNumber; s != nil {
			n += int64(len(*s))
		}
	}
	return n
}

// Settle trues up room taken for a read against what the read costs: it
// gives back what was taken beyond the cost, or forces what the cost
// exceeds it by. It returns the cost, which the batch then holds.
func Settle(room Room, taken, cost int64) int64 {
	switch {
	case room == nil:
		return 0
	case cost < taken:
		room.Give(taken - cost)
	case cost > taken:
		room.Force(cost - taken)
	}
	return cost
}

// FirstCostPerByte is what a read's records are taken to cost per byte of
// the message that carries them (a GetRecords answer, a fan-out event)
// before the shard's first records: 200-byte records cost about 3 times
// their message bytes (base64 data, sequence number and time in JSON,
// against their decoded form and their Benthos message), larger ones less.
const FirstCostPerByte = 4

// ordinaryMessage bounds the message of records up to 1 MiB each: a
// GetRecords answer the polling reader asks for (about 1 MiB of records)
// or a fan-out event of such records, as JSON with base64 data.
const ordinaryMessage = 2 << 20

// largeCostPerByte is what the records of a message cost per byte beyond
// ordinaryMessage: only records larger than 1 MiB (streams take up to 10
// MiB since 2025) make a message that large, and such records cost about
// their data, three quarters of their base64 (a kibibyte of overhead is
// nothing beside them).
const largeCostPerByte = 0.8

// MessageCost is what the records of a message of n bytes are expected to
// cost, at perByte (the shard's messages so far, or FirstCostPerByte) for
// its first ordinaryMessage bytes and at largeCostPerByte beyond: the
// room a message of one 10 MiB record takes is about its record, not four
// times it, however small the shard's records were until then.
func MessageCost(n int64, perByte float64) int64 {
	small := min(n, ordinaryMessage)
	return max(int64(float64(small)*perByte+float64(n-small)*largeCostPerByte), 1)
}
