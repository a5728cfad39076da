package read

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// pagedShards serves n shards in pages of size, like ListShards.
type pagedShards struct {
	n, size int
	calls   []*kinesis.ListShardsInput
	expire  int // answer ExpiredNextTokenException to this call (1-based), once
}

func (p *pagedShards) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	p.calls = append(p.calls, in)
	if len(p.calls) == p.expire {
		p.expire = 0
		return nil, &types.ExpiredNextTokenException{Message: aws.String("expired")}
	}
	start := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &start)
	}
	out := &kinesis.ListShardsOutput{}
	for i := start; i < p.n && i < start+p.size; i++ {
		out.Shards = append(out.Shards, types.Shard{ShardId: aws.String(fmt.Sprintf("shardId-%012d", i))})
	}
	if start+p.size < p.n {
		out.NextToken = aws.String(fmt.Sprint(start + p.size))
	}
	return out, nil
}

func TestListShardsReadsEveryPage(t *testing.T) {
	api := &pagedShards{n: 2500, size: 1000}
	shards, err := listShards(context.Background(), api, "arn:stream")
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2500 || len(api.calls) != 3 {
		t.Fatalf("%d shards in %d calls, want 2500 in 3", len(shards), len(api.calls))
	}
	for _, c := range api.calls[1:] {
		if c.StreamARN != nil || c.StreamName != nil {
			t.Fatal("a call with a NextToken also named the stream: Kinesis rejects that")
		}
	}
}

func TestListShardsRestartsOnExpiredToken(t *testing.T) {
	api := &pagedShards{n: 2500, size: 1000, expire: 2}
	shards, err := listShards(context.Background(), api, "arn:stream")
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2500 {
		t.Fatalf("%d shards after an expired token, want 2500", len(shards))
	}
}
