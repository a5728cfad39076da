package read

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// TestWithdrawnBatchIsSettledAndStopsItsReader: a batch ReadBatch withholds
// because its reader's lease lapsed is resolved as never handed out (the
// checkpoint stays before it, nobody waits for it), and its reader stops: one
// that read on would hand out records behind a checkpoint that can no longer
// pass the withheld batch, and they would come again after the lease's next
// move (115 duplicates in TestLeasesKinesisLocal under load before the fix).
func TestWithdrawnBatchIsSettledAndStopsItsReader(t *testing.T) {
	t.Parallel()
	var stopped error
	r := &shardReader{log: newShardLog(service.MockResources().Logger(), "orders", "s"), tracker: newAckTracker(10), g: grant{Grant: testGrant{}, stop: func(err error) { stopped = err }}}
	d := &delivery{batch: service.MessageBatch{service.NewMessage([]byte("lapsed"))}, r: r, e: r.tracker.TryTrack(pos(1), 1)}
	if !d.Lapsed(time.Now()) {
		t.Fatal("a batch of a lapsed grant is not lapsed")
	}
	d.Withdraw()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := r.tracker.Settled(ctx); err != nil {
		t.Fatal("the withheld batch is still waited for")
	}
	if cp := r.tracker.Checkpoint(); cp != nil {
		t.Fatalf("the checkpoint moved past a batch never handed out: %v", cp)
	}
	if !errors.Is(stopped, errLapsed) {
		t.Fatalf("the reader of the withheld batch was stopped with %v, want %v", stopped, errLapsed)
	}
}
