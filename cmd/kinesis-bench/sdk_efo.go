package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// sdkEFO is the fan-out baseline: per shard, one SubscribeToShard from the
// trim horizon, its events read until the shard's records are all in.
func sdkEFO(ctx context.Context, f *fake, m *meter) error {
	return eachShard(ctx, f, m, streamPlain, func(ctx context.Context, client *kinesis.Client, shardID string, want int) error {
		out, err := client.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
			ConsumerARN:      aws.String(f.consumers[streamPlain]),
			ShardId:          aws.String(shardID),
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
		}, ownProtocol)
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
				return ctx.Err()
			}
			if !ok {
				return fmt.Errorf("shard %s: subscription ended after %d records: %v", shardID, got, events.Err())
			}
			if e, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); isEvent {
				countRecords(m, e.Value.Records)
				got += len(e.Value.Records)
			}
		}
		return nil
	})
}

// ownProtocol gives a SubscribeToShard call a protocol of its own: the
// client's shared one races between streams read at once (see the
// kinesisfake package doc).
func ownProtocol(o *kinesis.Options) {
	o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
}
