package polling

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestLargeAnswerWaitsForRoomBeforeItsBodyIsRead: a stream takes records
// of 10 MiB, and one comes in an answer of any Limit. Other shards hold 12
// MiB of a 16 MiB budget; the reader's call, sized for small records, is
// answered with one of 10 MiB: the reader takes room for it before it
// reads the body, waiting until the others give theirs back, so that the
// budget is never gone over. (Before, the body was read at once and the
// record forced on the budget: several shards at once took a process of
// 256 shards to 181 MiB with a memory_limit of 64 MiB.)
func TestLargeAnswerWaitsForRoomBeforeItsBodyIsRead(t *testing.T) {
	t.Parallel()
	srv, err := kinesisfake.New(kinesisfake.Stream("s", 1, kinesisfake.MaxRecordKiB(10240)), kinesisfake.Quotas(false))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	big := bytes.Repeat([]byte{'x'}, 10<<20)
	if _, _, err := srv.Put("s", "k", big); err != nil {
		t.Fatal(err)
	}
	const limit = 16 << 20
	var mu sync.Mutex
	var peak int64
	budget := membudget.New(limit, func(used int64) {
		mu.Lock()
		peak = max(peak, used)
		mu.Unlock()
	})
	others, reader := budget.Join(), budget.Join()
	held, err := others.Take(t.Context(), 12<<20, 12<<20)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan shard.Batch, 1)
	done := make(chan error, 1)
	p := New(srv.NewClient(), srv.StreamARN("s"), Options{})
	go func() {
		done <- p.Read(ctx, "shardId-000000000000", shard.Start{Kind: shard.TrimHorizon}, reader, func(_ context.Context, b shard.Batch) error {
			if len(b.Records) > 0 {
				got <- b
				cancel()
			}
			return nil
		})
	}()
	for budget.Waiting() == 0 {
		select {
		case b := <-got:
			t.Fatalf("the answer of %d bytes was read while the budget had %d bytes free", len(b.Records[0].Data), limit-budget.Used())
		case <-ctx.Done():
			t.Fatal("the reader never waited for room")
		case <-time.After(time.Millisecond):
		}
	}
	others.Give(held)
	b := <-got
	<-done
	if len(b.Records) != 1 || !bytes.Equal(b.Records[0].Data, big) {
		t.Fatalf("read %d records, the first of %d bytes; want the record of 10 MiB", len(b.Records), len(b.Records[0].Data))
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > limit {
		t.Errorf("the budget of %d bytes was gone over: %d in use at most", limit, peak)
	}
}
