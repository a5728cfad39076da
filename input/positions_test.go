package input

import (
	"context"
	"errors"
	"testing"

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

func testPositions(store checkpoint.Store) *positions {
	return newPositions("orders", store, newMetrics(service.MockResources().Metrics()), checkpoint.Stream{})
}

// TestPositionsGuardEpochsAndSavedEnds: a reader of an older epoch changes
// nothing; an end counts for the children only once it is saved; a position
// never moves back.
func TestPositionsGuardEpochsAndSavedEnds(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{}
	p := testPositions(store)
	p.pin([]shardInfo{{id: "a", startSeq: "1"}, {id: "b", startSeq: "2"}}, checkpoint.Start{Kind: "TRIM_HORIZON"})
	old := p.current()

	p.setPosition("a", pos(5), old, 0)
	p.setPosition("a", pos(3), old, 0) // never backwards
	if cp, _ := p.of("a"); cp.Position == nil || *cp.Position != pos(5) {
		t.Fatalf("position %v, want 5", cp.Position)
	}

	store.fail = true
	if err := p.setEnded(ctx, "b", nil, old, 0); err == nil {
		t.Fatal("setEnded did not report the failed save")
	}
	if p.endSaved("b") {
		t.Fatal("an end that was not saved lets the children be read")
	}
	store.fail = false
	if err := p.commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.endSaved("b") {
		t.Fatal("a saved end is not known as saved")
	}

	p.reset(p.state.Created)
	p.pin([]shardInfo{{id: "a", startSeq: "9"}}, checkpoint.Start{Kind: "TRIM_HORIZON"})
	p.setPosition("a", pos(7), old, 0)
	if err := p.setEnded(ctx, "a", nil, old, 0); err != nil {
		t.Fatal(err)
	}
	if cp, _ := p.of("a"); cp.Position != nil || cp.Ended {
		t.Fatalf("a reader of the epoch before the reset changed the new state: %+v", cp)
	}
	if p.endSaved("b") {
		t.Fatal("an end of the old stream survived the reset")
	}
}

// TestPositionsPrune: a shard no longer listed loses its checkpoint (and is
// reported when unfinished); a listed one learns its starting sequence number.
func TestPositionsPrune(t *testing.T) {
	p := testPositions(&failingStore{})
	p.pin([]shardInfo{{id: "a"}, {id: "b"}, {id: "c"}}, checkpoint.Start{Kind: "TRIM_HORIZON"})
	if err := p.setEnded(context.Background(), "c", nil, p.current(), 0); err != nil {
		t.Fatal(err)
	}
	unfinished := p.prune(map[string]shardInfo{"a": {id: "a", startSeq: "42"}})
	if len(unfinished) != 1 || unfinished[0] != "b" {
		t.Fatalf("unfinished %v, want [b] (c had ended)", unfinished)
	}
	if cp, ok := p.of("a"); !ok || cp.ShardStart != "42" {
		t.Fatalf("a: %+v %v, want its starting sequence number 42", cp, ok)
	}
	if _, ok := p.of("b"); ok {
		t.Fatal("b is still checkpointed")
	}
	if id, _, _, ok := p.reused(map[string]shardInfo{"a": {id: "a", startSeq: "43"}}); !ok || id != "a" {
		t.Fatal("a shard id starting at another sequence number is not seen as reused")
	}
}
