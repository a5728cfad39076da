package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

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
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamARN: aws.String(arn), ShardId: aws.String(shardID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return fmt.Errorf("shard %s: %w", shardID, err)
		}
		iterator := it.ShardIterator
		var last time.Time
		for got := 0; got < want; {
			time.Sleep(time.Until(last.Add(polling.MinInterval)))
			last = time.Now()
			out, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{
				StreamARN: aws.String(arn), ShardIterator: iterator, Limit: aws.Int32(getRecordsLimit),
			})
			if err != nil {
				return fmt.Errorf("shard %s after %d records: %w", shardID, got, err)
			}
			countRecords(m, out.Records)
			got += len(out.Records)
			if iterator = out.NextShardIterator; iterator == nil {
				return fmt.Errorf("shard %s ended after %d records", shardID, got)
			}
		}
		return nil
	})
}
