package input

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// reshardAPI is what the resharding helpers call.
type reshardAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	SplitShard(ctx context.Context, in *kinesis.SplitShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SplitShardOutput, error)
	MergeShards(ctx context.Context, in *kinesis.MergeShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.MergeShardsOutput, error)
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// openShards lists the stream's open shards in hash key order.
func openShards(t *testing.T, api reshardAPI, stream string) []types.Shard {
	t.Helper()
	out, err := api.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var open []types.Shard
	for _, s := range out.Shards {
		if s.SequenceNumberRange.EndingSequenceNumber == nil || *s.SequenceNumberRange.EndingSequenceNumber == "" || *s.SequenceNumberRange.EndingSequenceNumber == "9223372036854775807" {
			open = append(open, s)
		}
	}
	return open
}

func waitActive(t *testing.T, api reshardAPI, stream string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := api.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err == nil && out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s not ACTIVE: %v", stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// split splits a shard in the middle of its hash key range.
func split(t *testing.T, api reshardAPI, stream string, s types.Shard) {
	t.Helper()
	lo, _ := new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
	hi, _ := new(big.Int).SetString(*s.HashKeyRange.EndingHashKey, 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := api.SplitShard(context.Background(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, api, stream)
}

func merge(t *testing.T, api reshardAPI, stream string, a, b types.Shard) {
	t.Helper()
	if _, err := api.MergeShards(context.Background(), &kinesis.MergeShardsInput{
		StreamName: aws.String(stream), ShardToMerge: a.ShardId, AdjacentShardToMerge: b.ShardId,
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, api, stream)
}

// checkParentsFirst asserts that every record of a parent shard was
// delivered before the first record of any of its children.
func checkParentsFirst(t *testing.T, msgs []inputtest.Got, parents map[string][]string) {
	t.Helper()
	lastOf, firstOf := map[string]int{}, map[string]int{}
	for i, m := range msgs {
		lastOf[m.Shard] = i
		if _, ok := firstOf[m.Shard]; !ok {
			firstOf[m.Shard] = i
		}
	}
	for child, ps := range parents {
		first, ok := firstOf[child]
		if !ok {
			continue
		}
		for _, p := range ps {
			if last, ok := lastOf[p]; ok && last > first {
				t.Fatalf("child shard %s delivered its first record (#%d) before parent %s's last (#%d)", child, first, p, last)
			}
		}
	}
}

func parentsOf(t *testing.T, api reshardAPI, stream string) map[string][]string {
	t.Helper()
	out, err := api.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, s := range out.Shards {
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p != nil && *p != "" {
				m[*s.ShardId] = append(m[*s.ShardId], *p)
			}
		}
	}
	return m
}

// TestLocalSplitAndMergeWhileReading splits a shard and merges one of its
// children with its neighbour while the pipeline reads: every record once,
// each partition key in order, every parent before its children.
func TestLocalSplitAndMergeWhileReading(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	want := inputtest.Produce(t, client, "orders", "a", 400, 64)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, localInput(k, "orders", t.TempDir(), "polling: { limit: 50 }"), out)
	out.WaitFor(t, 100, time.Minute)

	open := openShards(t, client, "orders")
	split(t, client, "orders", open[0])
	for d, pk := range inputtest.Produce(t, client, "orders", "b", 400, 64) {
		want[d] = pk
	}
	open = openShards(t, client, "orders") // [child low, child high, shard 1] by hash order
	sortByHash(open)
	merge(t, client, "orders", open[1], open[2])
	for d, pk := range inputtest.Produce(t, client, "orders", "c", 400, 64) {
		want[d] = pk
	}

	p.StopWhen(t, out, len(want), 2*time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	parents := parentsOf(t, client, "orders")
	checkParentsFirst(t, msgs, parents)
	merged := 0
	for _, ps := range parents {
		if len(ps) == 2 {
			merged++
		}
	}
	if merged != 1 {
		t.Fatalf("want one merged shard with two parents, got parents %v", parents)
	}
}

// TestLocalRestartBetweenParentEndAndChildStart stops the pipeline right after
// a closed parent's end is committed and before its children are read; the
// restart reads the children from their start and nothing of the parent again.
func TestLocalRestartBetweenParentEndAndChildStart(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 1)
	want := inputtest.Produce(t, client, "orders", "a", 200, 16)
	parent := openShards(t, client, "orders")[0]
	split(t, client, "orders", parent)
	dir := t.TempDir()
	conf := localInput(k, "orders", dir, "")

	first := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, conf, first)
	deadline := time.Now().Add(time.Minute)
	for !inputtest.ReadCheckpointsUnlocked(t, dir, k.StreamARN("orders")).Shards[*parent.ShardId].Ended {
		if time.Now().After(deadline) {
			t.Fatal("the parent's end was never committed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop(t)
	if first.Count() != len(want) {
		t.Fatalf("first run read %d of the parent's %d records", first.Count(), len(want))
	}

	for d, pk := range inputtest.Produce(t, client, "orders", "b", 200, 16) {
		want[d] = pk
	}
	second := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, second)
	p.StopWhen(t, second, 200, time.Minute)
	all := append(first.All(), second.All()...)
	inputtest.CheckDelivery(t, all, want, true)
	inputtest.CheckOrder(t, all)
}

// TestLocalClosedParentWithRecordsLeftAfterRestart stops the pipeline while a
// closed parent still has unread records: after the restart the parent is
// finished first, then its children.
func TestLocalClosedParentWithRecordsLeftAfterRestart(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 1)
	want := inputtest.Produce(t, client, "orders", "a", 800, 16)
	inParent := len(want)
	dir := t.TempDir()
	conf := localInput(k, "orders", dir, "polling: { limit: 50 }")

	first := &inputtest.Collector{}
	first.AcceptOnly(300) // and reject the rest: the parent stays unfinished
	p := inputtest.StartPipeline(t, conf, first)
	first.WaitFor(t, 300, time.Minute)
	split(t, client, "orders", openShards(t, client, "orders")[0])
	for d, pk := range inputtest.Produce(t, client, "orders", "b", 200, 16) {
		want[d] = pk
	}
	p.Stop(t)
	if first.Count() >= inParent {
		t.Fatalf("the first run finished the parent (%d records): the test needs it unfinished", first.Count())
	}

	second := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, second)
	p.StopWhen(t, second, len(want)-first.Count(), time.Minute)
	inputtest.CheckDelivery(t, append(first.All(), second.All()...), want, true)
	inputtest.CheckOrder(t, second.All())
	checkParentsFirst(t, second.All(), parentsOf(t, client, "orders"))
}

func sortByHash(shards []types.Shard) {
	key := func(s types.Shard) *big.Int {
		v, _ := new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
		return v
	}
	for i := 1; i < len(shards); i++ {
		for j := i; j > 0 && key(shards[j]).Cmp(key(shards[j-1])) < 0; j-- {
			shards[j], shards[j-1] = shards[j-1], shards[j]
		}
	}
}
