package kinesisfake

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// listAll follows NextToken to the end and returns the shard ids and the
// number of pages.
func listAll(t *testing.T, c *kinesis.Client, first *kinesis.ListShardsInput) ([]string, int) {
	t.Helper()
	ctx := testCtx(t)
	var ids []string
	in := first
	for pages := 1; ; pages++ {
		out, err := c.ListShards(ctx, in)
		must(t, err)
		for _, sh := range out.Shards {
			ids = append(ids, *sh.ShardId)
		}
		if out.NextToken == nil {
			return ids, pages
		}
		if pages > 100 {
			t.Fatal("runaway pagination")
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: first.MaxResults}
	}
}

func TestListShardsPagination(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("big", 2500), Quotas(false))
	c := newClient(s)

	ids, pages := listAll(t, c, &kinesis.ListShardsInput{StreamName: aws.String("big")})
	if len(ids) != 2500 || pages != 3 {
		t.Fatalf("default pages: %d shards in %d pages, want 2500 in 3", len(ids), pages)
	}
	for i, id := range ids {
		if id != shardIDFor(i) {
			t.Fatalf("shard %d is %s", i, id)
		}
	}
	// MaxResults above 1000 still gives pages of 1000.
	ids, pages = listAll(t, c, &kinesis.ListShardsInput{StreamARN: aws.String(s.StreamARN("big")), MaxResults: aws.Int32(5000)})
	if len(ids) != 2500 || pages != 3 {
		t.Fatalf("MaxResults 5000: %d shards in %d pages", len(ids), pages)
	}
	ids, pages = listAll(t, c, &kinesis.ListShardsInput{StreamName: aws.String("big"), MaxResults: aws.Int32(700), ExclusiveStartShardId: aws.String("shardId-000000000099")})
	if len(ids) != 2400 || pages != 4 || ids[0] != "shardId-000000000100" {
		t.Fatalf("from 100 by 700: %d shards in %d pages, first %s", len(ids), pages, ids[0])
	}
	// Exactly one full page: no NextToken.
	ids, pages = listAll(t, c, &kinesis.ListShardsInput{StreamName: aws.String("big"), ExclusiveStartShardId: aws.String("shardId-000000001499")})
	if len(ids) != 1000 || pages != 1 {
		t.Fatalf("last 1000: %d shards in %d pages", len(ids), pages)
	}
}

func TestListShardsErrors(t *testing.T) {
	s := newServer(t, Stream("s", 3))
	c := newClient(s)
	ctx := testCtx(t)
	first, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)})
	must(t, err)
	expired := s.seal(tokenListShards, token{issued: time.Now().Add(-6 * time.Minute), nums: []uint64{1, 1, 0, 0}})

	cases := []struct {
		name string
		in   kinesis.ListShardsInput
		code string
	}{
		{"missing stream", kinesis.ListShardsInput{StreamName: aws.String("nope")}, CodeResourceNotFound},
		{"max results 0", kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(0)}, CodeValidation},
		{"max results 10001", kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(10001)}, CodeValidation},
		{"token and name", kinesis.ListShardsInput{StreamName: aws.String("s"), NextToken: first.NextToken}, CodeInvalidArgument},
		{"token and start", kinesis.ListShardsInput{NextToken: first.NextToken, ExclusiveStartShardId: aws.String("shardId-000000000000")}, CodeInvalidArgument},
		{"garbage token", kinesis.ListShardsInput{NextToken: aws.String("bm90IGEgdG9rZW4=")}, CodeInvalidArgument},
		{"expired token", kinesis.ListShardsInput{NextToken: aws.String(expired)}, CodeExpiredNextToken},
		{"after shard id without id", kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId}}, CodeInvalidArgument},
		{"at timestamp without time", kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp}}, CodeInvalidArgument},
		{"bad filter type", kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: "SOMETIMES"}}, CodeValidation},
		{"wrong creation time", kinesis.ListShardsInput{StreamName: aws.String("s"), StreamCreationTimestamp: aws.Time(time.Unix(1, 0))}, CodeResourceNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ListShards(ctx, &tc.in)
			wantCode(t, err, tc.code)
		})
	}
}

func TestListShardsFilters(t *testing.T) {
	s := newServer(t, Stream("s", 2))
	c := newClient(s)
	ctx := testCtx(t)
	// shard 0 splits into 2 and 3; then 3 and 1 merge into 4.
	beforeSplit := time.Now()
	time.Sleep(5 * time.Millisecond)
	kids, err := s.SplitShard("s", "shardId-000000000000", "")
	must(t, err)
	time.Sleep(5 * time.Millisecond)
	betweenSplitAndMerge := time.Now()
	time.Sleep(5 * time.Millisecond)
	child, err := s.MergeShards("s", kids[1], "shardId-000000000001")
	must(t, err)
	if kids[0] != "shardId-000000000002" || kids[1] != "shardId-000000000003" || child != "shardId-000000000004" {
		t.Fatalf("children %v %s", kids, child)
	}

	all, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	must(t, err)
	byID := map[string]types.Shard{}
	for _, sh := range all.Shards {
		byID[*sh.ShardId] = sh
	}
	if len(byID) != 5 {
		t.Fatalf("%d shards", len(byID))
	}
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000003"} {
		if byID[id].SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("closed %s has no EndingSequenceNumber", id)
		}
	}
	if p := byID["shardId-000000000002"].ParentShardId; p == nil || *p != "shardId-000000000000" {
		t.Errorf("split child parent %v", p)
	}
	m := byID["shardId-000000000004"]
	if *m.ParentShardId != "shardId-000000000003" || *m.AdjacentParentShardId != "shardId-000000000001" {
		t.Errorf("merge child parents %s %s", *m.ParentShardId, *m.AdjacentParentShardId)
	}
	if *m.HashKeyRange.StartingHashKey != *byID["shardId-000000000003"].HashKeyRange.StartingHashKey ||
		*m.HashKeyRange.EndingHashKey != "340282366920938463463374607431768211455" {
		t.Errorf("merge child range %s-%s", *m.HashKeyRange.StartingHashKey, *m.HashKeyRange.EndingHashKey)
	}

	cases := []struct {
		filter types.ShardFilter
		want   []string
	}{
		{types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}, []string{"shardId-000000000000", "shardId-000000000001"}},
		{types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}, []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAtLatest}, []string{"shardId-000000000002", "shardId-000000000004"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String("shardId-000000000002")}, []string{"shardId-000000000003", "shardId-000000000004"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(beforeSplit)}, []string{"shardId-000000000000", "shardId-000000000001"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(betweenSplitAndMerge)}, []string{"shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}},
		{types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: aws.Time(betweenSplitAndMerge)}, []string{"shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.filter.Type), func(t *testing.T) {
			ids, _ := listAll(t, c, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &tc.filter, MaxResults: aws.Int32(1)})
			if len(ids) != len(tc.want) {
				t.Fatalf("got %v, want %v", ids, tc.want)
			}
			for i := range ids {
				if ids[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", ids, tc.want)
				}
			}
		})
	}
}
