package read

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// TestSubscribeGapAcrossReadRestarts: when efo.Read returns (a fatal
// error such as AccessDenied, or the retry limit), shardReader.publish calls
// Read again after a full-jitter wait drawn from [0, 1s] for the first retry.
// Before the fix the new Read started with a zero lastSubscribe and subscribed
// at once:
// two SubscribeToShard calls for one shard less than a second apart, which AWS
// rejects with LimitExceeded (1 call/s per consumer and shard).
func TestSubscribeGapAcrossReadRestarts(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	arn, err := srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // ACTIVE after 200 ms
	var mu sync.Mutex
	var calls []time.Time
	srv.Control("SubscribeToShard", func(*kinesisfake.Request) (bool, int, []byte) {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return false, 0, nil
	})
	srv.FailNext("SubscribeToShard", 3, "AccessDeniedException")

	startStreamHarness(t, srv, inputtest.OpenFileStore(t), func(client *kinesis.Client) Publisher {
		return efo.New(client, arn, efo.Options{Logger: service.MockResources().Logger()})
	})
	inputtest.WaitUntil(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 4 })
	mu.Lock()
	defer mu.Unlock()
	gap := time.Hour
	for i := 1; i < len(calls); i++ {
		gap = min(gap, calls[i].Sub(calls[i-1]))
	}
	if gap < time.Second {
		t.Fatalf("two SubscribeToShard calls for one shard %v apart (%d calls, %d throttled): AWS allows one per second", gap.Round(time.Millisecond), len(calls), srv.Throttled("SubscribeToShard"))
	}
}

// TestCheckpointLimitBoundsInFlight: the spec promises "At most
// checkpoint.limit records per shard are in flight unacknowledged". One read
// (a GetRecords answer or a fan-out event holds up to 10,000 records) larger
// than the limit must be split. Before the fix it was handed out whole, as one
// batch: ackTracker.Track admits any batch when nothing is pending.
func TestCheckpointLimitBoundsInFlight(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	pub := scriptedPub{read: func(ctx context.Context, id string, start shard.Start, deliver shard.Deliver) error {
		var recs []types.Record
		for i := 1; i <= 50; i++ {
			recs = append(recs, reviewRecord(fmt.Sprint(i), fmt.Sprint("r", i)))
		}
		if err := deliver(ctx, shard.Batch{Records: recs}); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	h := startStreamHarness(t, srv, inputtest.OpenFileStore(t), publisher(pub), limit(10))
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return len(h.data()) == 50 })
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := slices.Max(h.sizes); m > 10 {
		t.Fatalf("a batch of %d records was in flight with checkpoint.limit 10 (batches %v)", m, h.sizes)
	}
}

// TestBatchPolicyWithoutCountHoldsAtMostTheLimit: a batch policy without a
// count (a period, a byte size) holds at most checkpoint.limit records before
// it is flushed, so that a read of aggregates of many user records (empty
// ones never reach a byte size) is not held whole in the batcher. Before the
// fix the 200 user records of one aggregate were converted and added to the
// batcher at once, and went out as one batch of 200 with checkpoint.limit
// 10: one Kinesis record of 1 MB can hold 166,650.
func TestBatchPolicyWithoutCountHoldsAtMostTheLimit(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	users := make([]kpl.UserRecord, 200)
	for i := range users {
		users[i] = kpl.UserRecord{PartitionKey: "k", Data: []byte(fmt.Sprint("u", i))}
	}
	agg, err := kpl.Pack(users)
	if err != nil {
		t.Fatal(err)
	}
	pub := scriptedPub{read: func(ctx context.Context, id string, start shard.Start, deliver shard.Deliver) error {
		rec := reviewRecord("1", "")
		rec.Data = agg.Data
		if err := deliver(ctx, shard.Batch{Records: []types.Record{rec}}); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	h := startStreamHarness(t, srv, inputtest.OpenFileStore(t), publisher(pub), limit(10),
		func(e *Env) { e.Batching = service.BatchPolicy{Period: "50ms"} })
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return len(h.data()) == len(users) })
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := slices.Max(h.sizes); m > 10 {
		t.Fatalf("a batch of %d user records with checkpoint.limit 10 and a batch policy without a count (batches %v)", m, h.sizes)
	}
}
