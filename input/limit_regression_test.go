package input

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestCheckpointLimitBoundsInFlight: the spec promises "At most
// checkpoint.limit records per shard are in flight unacknowledged". One read
// (a GetRecords answer or a fan-out event holds up to 10,000 records) larger
// than the limit must be split. Before the fix it was handed out whole, as one
// batch: ackTracker.Track admits any batch when nothing is pending.
func TestCheckpointLimitBoundsInFlight(t *testing.T) {
	srv := newFake(t, kinesisfake.Stream("orders", 1))
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
	h := startStreamHarnessCP(t, srv, "limit: 10", "", mustOpenStore(t), func(*kinesisInput, *kinesis.Client) recordPublisher { return pub })
	waitUntil(t, 10*time.Second, func() bool { return len(h.data()) == 50 })
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := slices.Max(h.sizes); m > 10 {
		t.Fatalf("a batch of %d records was in flight with checkpoint.limit 10 (batches %v)", m, h.sizes)
	}
}
