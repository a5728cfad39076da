package input

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// shardInfo is what the input knows of a shard's place in the stream.
type shardInfo struct {
	id       string
	parents  []string // zero, one (split) or two (merge) shard ids
	hashLow  string   // hash key range, decimal, inclusive
	hashHigh string
	startSeq string // the shard's starting sequence number, when listed
	listed   bool   // from ListShards; false when learnt from ChildShards
}

// listShardsAPI is the part of the Kinesis client shard discovery calls.
type listShardsAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

// callTimeout bounds a control-plane call, so that one on a connection that
// died silently fails and is retried.
const callTimeout = 30 * time.Second

// listShards returns every shard of the stream, open and closed, following
// every page. An expired pagination token restarts the listing.
func listShards(ctx context.Context, api listShardsAPI, streamARN string) ([]shardInfo, error) {
	for attempt := 0; ; attempt++ {
		shards, err := listShardsOnce(ctx, api, streamARN)
		if err != nil && awserr.Is(err, "ExpiredNextTokenException") && attempt < 3 {
			continue
		}
		return shards, err
	}
}

func listShardsOnce(ctx context.Context, api listShardsAPI, streamARN string) ([]shardInfo, error) {
	var shards []shardInfo
	in := &kinesis.ListShardsInput{StreamARN: aws.String(streamARN), MaxResults: aws.Int32(1000)}
	for page := 1; ; page++ {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := api.ListShards(cctx, in)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listing shards (page %d): %w", page, err)
		}
		for _, sh := range out.Shards {
			shards = append(shards, shardInfoOf(sh))
		}
		if out.NextToken == nil || *out.NextToken == "" {
			return shards, nil
		}
		// With a NextToken, Kinesis wants neither the stream nor a filter.
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(1000)}
	}
}

func shardInfoOf(sh types.Shard) shardInfo {
	info := shardInfo{id: aws.ToString(sh.ShardId), listed: true}
	if r := sh.SequenceNumberRange; r != nil {
		info.startSeq = aws.ToString(r.StartingSequenceNumber)
	}
	for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
		if p != nil && *p != "" {
			info.parents = append(info.parents, *p)
		}
	}
	if r := sh.HashKeyRange; r != nil {
		info.hashLow, info.hashHigh = aws.ToString(r.StartingHashKey), aws.ToString(r.EndingHashKey)
	}
	return info
}

func childShardInfo(c types.ChildShard) shardInfo {
	info := shardInfo{id: aws.ToString(c.ShardId), parents: c.ParentShards}
	if r := c.HashKeyRange; r != nil {
		info.hashLow, info.hashHigh = aws.ToString(r.StartingHashKey), aws.ToString(r.EndingHashKey)
	}
	return info
}
