package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/bench"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// getRecordsLimit is what both polling scenarios ask for: the Kinesis
// maximum and the input's default.
const getRecordsLimit = 10000

// sdkPolling is the polling baseline: per shard, GetShardIterator from the
// trim horizon, then GetRecords with the input's limit and with the input's
// gap of polling.MinInterval between the starts of two calls. The gap is the
// Kinesis quota (5 calls/s per shard) that the input may not exceed, so the
// baseline keeps it too: at 10,000 records a call a shard yields at most
// 50,000 records/s.
func sdkPolling(ctx context.Context, f *fake, m *meter) error {
	arn := f.srv.StreamARN(streamPlain)
	return eachShard(ctx, f, m, streamPlain, func(ctx context.Context, client *kinesis.Client, shardID string, want int) error {
		return bench.PollFromStart(ctx, client, arn, shardID, getRecordsLimit, polling.MinInterval, want, func(recs []types.Record) { countRecords(m, recs) })
	})
}
