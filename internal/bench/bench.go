// Package bench holds the baselines that benchmarks measure the input
// against: bare aws-sdk-go-v2 read loops, used by the input's Go benchmarks
// and by cmd/kinesis-bench.
package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
)

// PollFromStart is the bare aws-sdk-go-v2 polling loop: GetShardIterator
// from the trim horizon, then GetRecords of up to limit records with gap
// between the starts of two calls (the input keeps the Kinesis quota of 5
// calls per second per shard, so the baseline does too), until want records
// have come, each call's records handed to seen.
func PollFromStart(ctx context.Context, client *kinesis.Client, streamARN, shardID string, limit int32, gap time.Duration, want int, seen func([]types.Record)) error {
	it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamARN: aws.String(streamARN), ShardId: aws.String(shardID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return fmt.Errorf("shard %s: %w", shardID, err)
	}
	iterator := it.ShardIterator
	var last time.Time
	for got := 0; got < want; {
		if d := time.Until(last.Add(gap)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return fmt.Errorf("shard %s after %d records: %w", shardID, got, ctx.Err())
			}
		}
		last = time.Now()
		out, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{
			StreamARN: aws.String(streamARN), ShardIterator: iterator, Limit: aws.Int32(limit),
		})
		var throttled *types.ProvisionedThroughputExceededException
		if errors.As(err, &throttled) {
			// With the read quotas on (2 MiB/s per shard): the next call
			// after the gap, as the input's reader retries.
			continue
		}
		if err != nil {
			return fmt.Errorf("shard %s after %d records: %w", shardID, got, err)
		}
		if len(out.Records) > 0 {
			seen(out.Records)
		}
		got += len(out.Records)
		if iterator = out.NextShardIterator; iterator == nil {
			return fmt.Errorf("shard %s ended after %d records", shardID, got)
		}
	}
	return nil
}

// SubscribeFromStart is the bare aws-sdk-go-v2 fan-out loop that benchmarks
// measure the input against: one SubscribeToShard from the trim horizon,
// reading events until want records have come, each event's records handed
// to seen.
func SubscribeFromStart(ctx context.Context, client *kinesis.Client, consumerARN, shardID string, want int, seen func([]types.Record)) error {
	out, err := client.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String(consumerARN),
		ShardId:          aws.String(shardID),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
	}, sdkopt.OwnProtocol)
	if err != nil {
		return fmt.Errorf("shard %s: %w", shardID, err)
	}
	events := out.GetStream()
	defer events.Close()
	for got := 0; got < want; {
		var ev types.SubscribeToShardEventStream
		var ok bool
		select {
		case ev, ok = <-events.Events():
		case <-ctx.Done():
			return fmt.Errorf("shard %s after %d records: %w", shardID, got, ctx.Err())
		}
		if !ok {
			return fmt.Errorf("shard %s: subscription ended after %d records: %v", shardID, got, events.Err())
		}
		if e, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); isEvent && len(e.Value.Records) > 0 {
			seen(e.Value.Records)
			got += len(e.Value.Records)
		}
	}
	return nil
}
