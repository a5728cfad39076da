package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/bench"
)

// sdkEFO is the fan-out baseline: per shard, one SubscribeToShard from the
// trim horizon, its events read until the shard's records are all in.
func sdkEFO(ctx context.Context, f *fake, m *meter) error {
	return eachShard(ctx, f, m, streamPlain, func(ctx context.Context, client *kinesis.Client, shardID string, want int) error {
		return bench.SubscribeFromStart(ctx, client, f.consumers[streamPlain], shardID, want, func(recs []types.Record) { countRecords(m, recs) })
	})
}
