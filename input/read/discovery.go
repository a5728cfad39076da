package read

import (
	"context"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
)

// shardInfo is what the input knows of a shard's place in the stream.
type shardInfo struct {
	id       string
	parents  []string // zero, one (split) or two (merge) shard ids
	hashLow  string   // hash key range, decimal, inclusive
	hashHigh string
	startSeq string // the shard's starting sequence number, when listed
	endSeq   string // its ending sequence number: listed closed
	listed   bool   // from ListShards; false when learnt from ChildShards
}

// coordShard is the shard as a coordinator knows it.
func (sh shardInfo) coordShard() coord.Shard {
	return coord.Shard{ID: sh.id, StartSeq: sh.startSeq, EndSeq: sh.endSeq, Listed: sh.listed, Parents: sh.parents}
}

func coordShardList(shards []shardInfo) []coord.Shard {
	out := make([]coord.Shard, len(shards))
	for i, sh := range shards {
		out[i] = sh.coordShard()
	}
	return out
}

func coordShards(shards map[string]shardInfo) map[string]coord.Shard {
	out := make(map[string]coord.Shard, len(shards))
	for id, sh := range shards {
		out[id] = sh.coordShard()
	}
	return out
}

// callTimeout bounds a control-plane call, so that one on a connection that
// died silently fails and is retried.
const callTimeout = 30 * time.Second

// listShards returns every shard of the stream, open and closed, following
// every page.
func listShards(ctx context.Context, api awsclient.ListShardsAPI, streamARN string) ([]shardInfo, error) {
	listed, err := awsclient.ListShards(ctx, api, streamARN)
	if err != nil {
		return nil, err
	}
	shards := make([]shardInfo, len(listed))
	for i, sh := range listed {
		shards[i] = shardInfoOf(sh)
	}
	return shards, nil
}

func shardInfoOf(sh types.Shard) shardInfo {
	info := shardInfo{id: aws.ToString(sh.ShardId), listed: true}
	if r := sh.SequenceNumberRange; r != nil {
		info.startSeq = aws.ToString(r.StartingSequenceNumber)
		info.endSeq = aws.ToString(r.EndingSequenceNumber)
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
