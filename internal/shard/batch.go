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
}

// Deliver hands a batch to the consumer of a publisher. It blocks while the
// consumer is not ready (this is the publisher's back-pressure) and returns an
// error only when ctx ends or the consumer is shutting down; the publisher then
// stops and returns that error.
type Deliver func(ctx context.Context, b Batch) error
