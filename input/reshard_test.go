package input

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
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

// TestParentPastRetentionDoesNotBlockChildren: a closed parent shard
// that is still being read when it passes the retention period (the input was
// down for most of a day, or is far behind) disappears from ListShards and
// answers ResourceNotFoundException. Its records are gone; its children's
// records are not, yet, and expire in turn if they are not read.
//
// Before the fix, parentsEnded treated a parent no longer listed as gone, but
// discover keeps every shard that has a running reader in s.shards ("being
// read: not gone yet"), and the parent's reader never stops: shardReader.publish
// retries the fatal ResourceNotFound forever (with a backoff of up to 2 min).
// So the children are never read: a permanent, silent-but-for-logs stall that
// turns into further loss when the children's records expire.
func TestParentPastRetentionDoesNotBlockChildren(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	const parent = "shardId-000000000000"
	if _, _, err := srv.Put("orders", "k", []byte("old")); err != nil {
		t.Fatal(err)
	}
	children, err := srv.SplitShard("orders", parent, "")
	if err != nil {
		t.Fatal(err)
	}
	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	// The listing once the parent has passed the retention period.
	type hk struct{ StartingHashKey, EndingHashKey string }
	type sn struct{ StartingSequenceNumber string }
	type sh struct {
		ShardId             string
		ParentShardId       string `json:",omitempty"`
		HashKeyRange        hk
		SequenceNumberRange sn
	}
	var listing struct{ Shards []sh }
	for _, s := range shards {
		if aws.ToString(s.ShardId) == parent {
			continue
		}
		listing.Shards = append(listing.Shards, sh{
			ShardId: aws.ToString(s.ShardId), ParentShardId: aws.ToString(s.ParentShardId),
			HashKeyRange:        hk{aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey)},
			SequenceNumberRange: sn{aws.ToString(s.SequenceNumberRange.StartingSequenceNumber)},
		})
	}
	expiredListing, _ := json.Marshal(listing)

	var expired atomic.Bool
	expired.Store(true) // already past retention when the input (re)starts reading it
	var mu sync.Mutex
	childReads := 0
	srv.Control("ListShards", func(*kinesisfake.Request) (bool, int, []byte) {
		if expired.Load() {
			return true, 200, expiredListing
		}
		return false, 0, nil
	})
	srv.Control("GetShardIterator", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ ShardId string }
		json.Unmarshal(r.Body, &in)
		if in.ShardId == parent {
			status, body := kinesisfake.ErrorBody("ResourceNotFoundException", "Shard "+parent+" does not exist")
			return true, status, body
		}
		mu.Lock()
		childReads++
		mu.Unlock()
		return false, 0, nil
	})
	// The parent is known and unfinished: a checkpoint from before the outage.
	expired.Store(false)
	store := mustOpenStore(t)
	h := startStreamHarnessWith(t, srv, "shard_discovery_interval: 1s", store, func(in *kinesisInput, client *kinesis.Client) recordPublisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	})
	waitUntil(t, 10*time.Second, func() bool {
		_, ok := h.s.pos.Of(parent)
		return ok
	})
	expired.Store(true) // the parent passes the retention period
	read := eventually(time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return childReads > 0
	})
	if !read {
		t.Fatalf("the parent %s is gone (not listed, ResourceNotFound) but its children %v were never read in a minute: its reader keeps it 'running', so it is never pruned and parentsEnded waits for it forever", parent, children)
	}
}

func reviewRecord(seq, data string) types.Record {
	return types.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte(data)}
}

// TestMergeWaitsForAParentLearntLater: shard 0 splits into C0 and C1,
// then C1 merges with shard 1 into M (UpdateShardCount does such sequences).
// Shard 0's reader is behind, so shard 1 reaches its end first and reports
// M as its child, with parents [C1, shard 1]. C1 is not known yet (it is only
// learnt from shard 0's end, or the next discovery). M must not be read
// before C1 (and so shard 0) has been read to its end: records of the
// partition keys that moved from shard 0 to C1 to M would come out of order.
//
// Before a fix, parentsEnded takes a parent it does not know for "gone past
// retention" and M is read at once, before C1 and before shard 0 ends.
func TestMergeWaitsForAParentLearntLater(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"

	var mu sync.Mutex
	started := map[string]time.Time{}
	ended := map[string]time.Time{}
	var c0, c1, m string
	release := make(chan struct{})
	resharded := make(chan struct{})

	pub := scriptedPub{read: func(ctx context.Context, id string, start shard.Start, deliver shard.Deliver) error {
		mu.Lock()
		started[id] = time.Now()
		mu.Unlock()
		end := func(b shard.Batch) error {
			b.End = true
			if err := deliver(ctx, b); err != nil {
				return err
			}
			mu.Lock()
			ended[id] = time.Now()
			mu.Unlock()
			return nil
		}
		switch id {
		case s0: // behind: its end comes late
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return end(shard.Batch{Records: []types.Record{reviewRecord("100", "s0-last")}, ChildShards: []types.ChildShard{
				{ShardId: aws.String(c0), ParentShards: []string{s0}},
				{ShardId: aws.String(c1), ParentShards: []string{s0}},
			}})
		case s1:
			select {
			case <-resharded:
			case <-ctx.Done():
				return ctx.Err()
			}
			return end(shard.Batch{Records: []types.Record{reviewRecord("200", "s1-last")}, ChildShards: []types.ChildShard{
				{ShardId: aws.String(m), ParentShards: []string{c1, s1}},
			}})
		default:
			return end(shard.Batch{Records: []types.Record{reviewRecord("300", id)}})
		}
	}}

	startStreamHarness(t, srv, "shard_discovery_interval: 1h", mustOpenStore(t), pub)
	// Wait until both shards are being read (discovery and pinning done).
	waitUntil(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 2 })

	children, err := srv.SplitShard("orders", s0, "")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := srv.MergeShards("orders", children[1], s1)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	c0, c1, m = children[0], children[1], merged
	mu.Unlock()
	close(resharded)

	// Shard 1 ends; give the stream reader time to act on its children.
	waitUntil(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); _, ok := ended[s1]; return ok })
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	mStart, mStarted := started[m]
	_, c1Ended := ended[c1]
	_, s0Ended := ended[s0]
	mu.Unlock()
	close(release)
	if mStarted && !c1Ended {
		t.Fatalf("merged shard %s was read at %v while its parent %s was never read (and %s, its parent, had not ended: %v): parentsEnded took the unknown parent for gone",
			m, mStart.Format(time.RFC3339Nano), c1, s0, s0Ended)
	}
}

// TestChildWaitsForDurableParentEnd: a parent reaches its end but the
// commit of that end fails (disk full, EIO). The child must not be read while
// the parent's end is not checkpointed (the design: "read only after every parent
// has been read to its end and that end checkpointed").
//
// Before a fix, setEnded marks the parent Ended in memory before the commit
// and keeps it so when the commit fails; the next schedule (here a discovery
// tick) starts the child.
func TestChildWaitsForDurableParentEnd(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	const s0 = "shardId-000000000000"
	children, err := srv.SplitShard("orders", s0, "")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	started := map[string]bool{}
	pub := scriptedPub{read: func(ctx context.Context, id string, start shard.Start, deliver shard.Deliver) error {
		mu.Lock()
		started[id] = true
		mu.Unlock()
		if id != s0 {
			<-ctx.Done()
			return ctx.Err()
		}
		return deliver(ctx, shard.Batch{Records: []types.Record{reviewRecord("100", "s0-last")}, End: true})
	}}
	store := &endFailingStore{Store: mustOpenStore(t)}
	startStreamHarness(t, srv, "shard_discovery_interval: 1s", store, pub)

	waitUntil(t, 10*time.Second, func() bool { return store.failed() > 0 })
	time.Sleep(2500 * time.Millisecond) // two discovery ticks
	mu.Lock()
	defer mu.Unlock()
	for _, c := range children {
		if started[c] {
			t.Fatalf("child %s is being read although the end of its parent %s was never checkpointed (%d failed commits of it)", c, s0, store.failed())
		}
	}
}

// endFailingStore fails every save that records a shard's end.
type endFailingStore struct {
	checkpoint.Store
	mu    sync.Mutex
	fails int
}

func (s *endFailingStore) Save(ctx context.Context, st checkpoint.Stream) error {
	for _, cp := range st.Shards {
		if cp.Ended {
			s.mu.Lock()
			s.fails++
			s.mu.Unlock()
			return errors.New("injected: no space left on device")
		}
	}
	return s.Store.Save(ctx, st)
}

func (s *endFailingStore) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fails
}
