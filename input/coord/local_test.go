package coord

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// failingStore fails every save while fail is set.
type failingStore struct {
	checkpoint.Store
	fail  bool
	saved []checkpoint.Stream
}

func (s *failingStore) Save(_ context.Context, st checkpoint.Stream) error {
	if s.fail {
		return errors.New("injected: disk full")
	}
	s.saved = append(s.saved, st)
	return nil
}

func testLocal(store checkpoint.Store) *localCoordinator {
	res := service.MockResources()
	st := Stream{Name: "orders", Log: res.Logger(), Metrics: NewMetrics(res.Metrics())}
	return &localCoordinator{st: st, store: store, pos: NewPositions(checkpoint.Stream{})}
}

func pos(n int) checkpoint.Position { return checkpoint.Position{Sequence: strconv.Itoa(n)} }

// grantOf acquires a shard's grant of the local store.
func grantOf(t *testing.T, c *localCoordinator, shardID string) Grant {
	t.Helper()
	g, ok := c.Acquire(shardID, func(error) {})
	if !ok {
		t.Fatalf("no grant for %s", shardID)
	}
	return g
}

// TestLocalCoordinatorGuardsEpochsAndSavedEnds: a reader of an older epoch
// changes nothing; an end counts for the children only once it is saved; a
// position never moves back.
func TestLocalCoordinatorGuardsEpochsAndSavedEnds(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{}
	c := testLocal(store)
	p := c.pos
	if err := c.Pin(ctx, []Shard{{ID: "a", StartSeq: "1"}, {ID: "b", StartSeq: "2"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, true); err != nil {
		t.Fatal(err)
	}
	ga, gb := grantOf(t, c, "a"), grantOf(t, c, "b")

	ga.Acked(pos(5))
	ga.Acked(pos(3)) // never backwards
	if cp, _ := p.Of("a"); cp.Position == nil || *cp.Position != pos(5) {
		t.Fatalf("position %v, want 5", cp.Position)
	}

	store.fail = true
	if err := gb.Ended(ctx, nil); err == nil {
		t.Fatal("ended did not report the failed save")
	}
	if p.EndSaved("b") {
		t.Fatal("an end that was not saved lets the children be read")
	}
	store.fail = false
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.EndSaved("b") {
		t.Fatal("a saved end is not known as saved")
	}

	if err := c.Reset(ctx, p.state.Created); err != nil {
		t.Fatal(err)
	}
	if err := c.Pin(ctx, []Shard{{ID: "a", StartSeq: "9"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, true); err != nil {
		t.Fatal(err)
	}
	ga.Acked(pos(7))
	if err := ga.Ended(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if cp, _ := p.Of("a"); cp.Position != nil || cp.Ended {
		t.Fatalf("a reader of the epoch before the reset changed the new state: %+v", cp)
	}
	if p.EndSaved("b") {
		t.Fatal("an end of the old stream survived the reset")
	}
}

// TestLocalCoordinatorPrune: a shard no longer listed loses its checkpoint
// (and is reported when unfinished); a listed one learns its starting
// sequence number.
func TestLocalCoordinatorPrune(t *testing.T) {
	ctx := context.Background()
	c := testLocal(&failingStore{})
	p := c.pos
	if err := c.Pin(ctx, []Shard{{ID: "a"}, {ID: "b"}, {ID: "c"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, true); err != nil {
		t.Fatal(err)
	}
	if err := grantOf(t, c, "c").Ended(ctx, nil); err != nil {
		t.Fatal(err)
	}
	unfinished := c.Prune(map[string]Shard{"a": {ID: "a", StartSeq: "42"}})
	if len(unfinished) != 1 || unfinished[0] != "b" {
		t.Fatalf("unfinished %v, want [b] (c had ended)", unfinished)
	}
	if cp, ok := p.Of("a"); !ok || cp.ShardStart != "42" {
		t.Fatalf("a: %+v %v, want its starting sequence number 42", cp, ok)
	}
	if _, ok := p.Of("b"); ok {
		t.Fatal("b is still checkpointed")
	}
	if id, _, _, ok := p.Reused(map[string]Shard{"a": {ID: "a", StartSeq: "43"}}); !ok || id != "a" {
		t.Fatal("a shard id starting at another sequence number is not seen as reused")
	}
}

// TestStoppedWaitsForSettlingUntilTheStreamIsReset: a stopped reader's
// grant waits for what the reader handed out to settle, but not past a
// reset of the stream, even one that comes while it waits (a reset cancels
// the readers before it moves the epoch: on a loaded machine, the old
// stream's rejected records, replayed for ever, held the reader of the new
// stream's shard of the same id).
func TestStoppedWaitsForSettlingUntilTheStreamIsReset(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := testLocal(&failingStore{})
	if err := c.Pin(ctx, []Shard{{ID: "a", StartSeq: "1"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, true); err != nil {
		t.Fatal(err)
	}
	g := grantOf(t, c, "a")
	waiting := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.Stopped(ctx, func(ctx context.Context) error {
			close(waiting)
			<-ctx.Done() // never settles: rejected and replayed for ever
			return ctx.Err()
		})
	}()
	<-waiting
	select {
	case <-stopped:
		t.Fatal("Stopped returned before anything settled, with no reset")
	case <-time.After(50 * time.Millisecond):
	}
	if err := c.Reset(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stopped still waits for the old stream's records after the reset")
	}
	// A grant of the epoch before returns at once.
	g.Stopped(ctx, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
}
