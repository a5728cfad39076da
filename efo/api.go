package efo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// SubscribeAPI is the part of the Kinesis client a Publisher calls;
// *kinesis.Client satisfies it.
type SubscribeAPI interface {
	SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
}

// ConsumerAPI is the part of the Kinesis client that consumer registration
// calls; *kinesis.Client satisfies it. ListStreamConsumers is deliberately not
// in it: its quota (5 calls/s per stream) would bound how fast many instances
// start.
type ConsumerAPI interface {
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DeregisterStreamConsumer(ctx context.Context, in *kinesis.DeregisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DeregisterStreamConsumerOutput, error)
}
