package awsclient

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// ListShardsAPI is the part of the Kinesis client ListShards needs.
type ListShardsAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

// ListShards returns every shard of a stream, open and closed (within its
// retention), following every page. An expired pagination token restarts
// the listing (three times at most).
func ListShards(ctx context.Context, api ListShardsAPI, streamARN string) ([]types.Shard, error) {
	for attempt := 0; ; attempt++ {
		shards, err := listShardsOnce(ctx, api, streamARN)
		if err != nil && awserr.Is(err, "ExpiredNextTokenException") && attempt < 3 {
			continue
		}
		return shards, err
	}
}

func listShardsOnce(ctx context.Context, api ListShardsAPI, streamARN string) ([]types.Shard, error) {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{StreamARN: aws.String(streamARN), MaxResults: aws.Int32(1000)}
	for page := 1; ; page++ {
		// The client bounds each page's call (KinesisCallTimeout).
		out, err := api.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing shards (page %d): %w", page, err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil || *out.NextToken == "" {
			return shards, nil
		}
		// With a NextToken, Kinesis wants neither the stream nor a filter.
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(1000)}
	}
}
