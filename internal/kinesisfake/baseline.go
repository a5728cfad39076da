package kinesisfake

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// OwnProtocol gives a SubscribeToShard call a protocol of its own: the
// client's shared one races between streams read at once (see the package
// doc).
func OwnProtocol(o *kinesis.Options) {
	o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
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
	}, OwnProtocol)
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
