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
