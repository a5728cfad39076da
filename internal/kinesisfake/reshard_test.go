package kinesisfake

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// readToEnd reads a shard from TRIM_HORIZON with GetRecords until
// NextShardIterator is absent and returns the data, the child shards and the
// number of calls.
func readToEnd(t *testing.T, c *kinesis.Client, stream, shard string, limit int32) ([]string, []types.ChildShard, int) {
	t.Helper()
	ctx := testCtx(t)
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	next := it.ShardIterator
	var data []string
	for calls := 1; calls < 100; calls++ {
		out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: next, Limit: aws.Int32(limit)})
		must(t, err)
		for _, r := range out.Records {
			data = append(data, string(r.Data))
		}
		if out.NextShardIterator == nil {
			return data, out.ChildShards, calls
		}
		if out.ChildShards != nil {
			t.Fatalf("ChildShards with a NextShardIterator")
		}
		next = out.NextShardIterator
	}
	t.Fatal("shard never ended")
	return nil, nil, 0
}

func TestSplitThenReadToShardEnd(t *testing.T) {
	for _, withRecords := range []bool{true, false} {
		t.Run(fmt.Sprintf("ShardEndWithRecords=%v", withRecords), func(t *testing.T) {
			s := newServer(t, Stream("s", 1), Quotas(false), ShardEndWithRecords(withRecords))
			c := newClient(s)
			ctx := testCtx(t)
			for i := range 5 {
				_, _, err := s.Put("s", fmt.Sprint(i), []byte(fmt.Sprint(i)))
				must(t, err)
			}
			_, err := c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String("shardId-000000000000"), NewStartingHashKey: aws.String("170141183460469231731687303715884105728")})
			must(t, err)
			for i := 5; i < 10; i++ {
				_, _, err := s.Put("s", fmt.Sprint(i), []byte(fmt.Sprint(i)))
				must(t, err)
			}

			data, children, calls := readToEnd(t, c, "s", "shardId-000000000000", 5)
			if strings.Join(data, " ") != "0 1 2 3 4" {
				t.Fatalf("parent data %v", data)
			}
			if wantCalls := map[bool]int{true: 1, false: 2}[withRecords]; calls != wantCalls {
				t.Fatalf("shard end after %d calls, want %d", calls, wantCalls)
			}
			if len(children) != 2 {
				t.Fatalf("children %+v", children)
			}
			wantRanges := [][2]string{
				{"0", "170141183460469231731687303715884105727"},
				{"170141183460469231731687303715884105728", "340282366920938463463374607431768211455"},
			}
			for i, ch := range children {
				if *ch.ShardId != shardIDFor(i+1) || len(ch.ParentShards) != 1 || ch.ParentShards[0] != "shardId-000000000000" ||
					*ch.HashKeyRange.StartingHashKey != wantRanges[i][0] || *ch.HashKeyRange.EndingHashKey != wantRanges[i][1] {
					t.Errorf("child %d: %s parents %v range %s-%s", i, *ch.ShardId, ch.ParentShards, *ch.HashKeyRange.StartingHashKey, *ch.HashKeyRange.EndingHashKey)
				}
			}
			// The records put after the split are in the children, numbered
			// above the parent's end.
			shards, err := s.Shards("s")
			must(t, err)
			parentEnd := bigOf(t, *shards[0].SequenceNumberRange.EndingSequenceNumber)
			var later []string
			for _, id := range []string{"shardId-000000000001", "shardId-000000000002"} {
				recs, err := s.ShardRecords("s", id)
				must(t, err)
				for _, r := range recs {
					later = append(later, string(r.Data))
					if bigOf(t, *r.SequenceNumber).Cmp(parentEnd) <= 0 {
						t.Errorf("child record %s not above parent end %s", *r.SequenceNumber, parentEnd)
					}
				}
			}
			sort.Strings(later)
			if strings.Join(later, " ") != "5 6 7 8 9" {
				t.Fatalf("children data %v", later)
			}
			// Reading the closed parent again from the end still ends.
			it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeLatest})
			must(t, err)
			out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
			must(t, err)
			if out.NextShardIterator != nil || len(out.ChildShards) != 2 || len(out.Records) != 0 {
				t.Fatalf("LATEST on closed shard: %+v", out)
			}
		})
	}
}

func TestMergeThenReadToShardEnd(t *testing.T) {
	s := newServer(t, Stream("s", 3), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	_, _, err := s.PutWithHashKey("s", "0", "a", []byte("a"))
	must(t, err)
	_, err = c.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String("s"), ShardToMerge: aws.String("shardId-000000000001"), AdjacentShardToMerge: aws.String("shardId-000000000000")})
	must(t, err)
	for _, parent := range []string{"shardId-000000000000", "shardId-000000000001"} {
		_, children, _ := readToEnd(t, c, "s", parent, 100)
		if len(children) != 1 || *children[0].ShardId != "shardId-000000000003" ||
			strings.Join(children[0].ParentShards, ",") != "shardId-000000000001,shardId-000000000000" ||
			*children[0].HashKeyRange.StartingHashKey != "0" {
			t.Fatalf("children of %s: %+v", parent, children)
		}
	}

	cases := []struct {
		name        string
		a, b        string
		code        string
		splitAt     string
		splitTarget string
	}{
		{name: "not adjacent", a: "shardId-000000000002", b: "shardId-000000000000", code: CodeInvalidArgument},
		{name: "closed", a: "shardId-000000000000", b: "shardId-000000000003", code: CodeInvalidArgument},
		{name: "itself", a: "shardId-000000000002", b: "shardId-000000000002", code: CodeInvalidArgument},
		{name: "unknown", a: "shardId-000000000002", b: "shardId-000000000042", code: CodeResourceNotFound},
		{name: "split at start", splitTarget: "shardId-000000000003", splitAt: "0", code: CodeInvalidArgument},
		{name: "split past end", splitTarget: "shardId-000000000003", splitAt: "340282366920938463463374607431768211455", code: CodeInvalidArgument},
		{name: "split closed", splitTarget: "shardId-000000000000", splitAt: "5", code: CodeInvalidArgument},
		{name: "split bad key", splitTarget: "shardId-000000000003", splitAt: "x", code: CodeInvalidArgument},
		{name: "split unknown", splitTarget: "shardId-000000000099", splitAt: "5", code: CodeResourceNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.splitTarget != "" {
				_, err = c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String(tc.splitTarget), NewStartingHashKey: aws.String(tc.splitAt)})
			} else {
				_, err = c.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String("s"), ShardToMerge: aws.String(tc.a), AdjacentShardToMerge: aws.String(tc.b)})
			}
			wantCode(t, err, tc.code)
		})
	}
}

func TestUpdateShardCount(t *testing.T) {
	s := newServer(t, Stream("s", 4), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	for _, target := range []int32{6, 3, 5, 10} {
		out, err := c.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("s"), TargetShardCount: aws.Int32(target), ScalingType: types.ScalingTypeUniformScaling})
		must(t, err)
		if *out.TargetShardCount != target {
			t.Fatalf("target %d", *out.TargetShardCount)
		}
		shards, err := s.Shards("s")
		must(t, err)
		byID := map[string]types.Shard{}
		var open []types.Shard
		for _, sh := range shards {
			byID[*sh.ShardId] = sh
			if sh.SequenceNumberRange.EndingSequenceNumber == nil {
				open = append(open, sh)
			}
		}
		if len(open) != int(target) {
			t.Fatalf("target %d: %d open shards", target, len(open))
		}
		sort.Slice(open, func(i, j int) bool {
			return bigOf(t, *open[i].HashKeyRange.StartingHashKey).Cmp(bigOf(t, *open[j].HashKeyRange.StartingHashKey)) < 0
		})
		space := new(big.Int).Lsh(big.NewInt(1), 128)
		for i, sh := range open {
			want := new(big.Int).Quo(new(big.Int).Mul(space, big.NewInt(int64(i))), big.NewInt(int64(target)))
			if bigOf(t, *sh.HashKeyRange.StartingHashKey).Cmp(want) != 0 {
				t.Fatalf("target %d: open shard %d starts at %s, want %s", target, i, *sh.HashKeyRange.StartingHashKey, want)
			}
			// Every parent is closed: the lineage is made of splits and merges.
			for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
				if p != nil && byID[*p].SequenceNumberRange.EndingSequenceNumber == nil {
					t.Fatalf("parent %s of open %s is open", *p, *sh.ShardId)
				}
			}
		}
	}
	_, err := c.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("s"), TargetShardCount: aws.Int32(21), ScalingType: types.ScalingTypeUniformScaling})
	wantCode(t, err, CodeInvalidArgument)
}
