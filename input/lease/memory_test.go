package lease

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// TestMemoryFail: a failure set for one method fails only its calls, and
// changes nothing; FailAll fails every method until FailAll(nil), which
// leaves the failures of single methods in place.
func TestMemoryFail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := NewMemory()
	held, err := m.Take(ctx, mustCreate(t, m, "shardId-000000000000"), "a", "")
	if err != nil {
		t.Fatal(err)
	}
	throttled := errors.New("throttled")
	m.Fail("Hold", throttled)
	if _, err := m.Hold(ctx, arn, held.ShardID, "a", held.Counter, Write{}); !errors.Is(err, throttled) {
		t.Fatalf("hold with a failure set: %v, want it", err)
	}
	if got, _, err := m.Get(ctx, arn, held.ShardID); err != nil || got.Counter != held.Counter {
		t.Fatalf("get while hold fails: %+v, %v; want the item unchanged", got, err)
	}

	down := errors.New("unreachable")
	m.FailAll(down)
	if _, err := m.Scan(ctx, arn); !errors.Is(err, down) {
		t.Fatalf("scan of an unreachable table: %v", err)
	}
	if err := m.Heartbeat(ctx, arn, "a", Presence{Nonce: "n"}, false); !errors.Is(err, down) {
		t.Fatalf("heartbeat on an unreachable table: %v", err)
	}
	if _, err := m.Hold(ctx, arn, held.ShardID, "a", held.Counter, Write{}); !errors.Is(err, throttled) {
		t.Fatalf("hold on an unreachable table with its own failure set: %v, want its own", err)
	}
	m.FailAll(nil)
	if _, err := m.Scan(ctx, arn); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Hold(ctx, arn, held.ShardID, "a", held.Counter, Write{}); !errors.Is(err, throttled) {
		t.Fatalf("hold after FailAll(nil): %v; want its own failure still", err)
	}
	m.Fail("Hold", nil)
	if _, err := m.Hold(ctx, arn, held.ShardID, "a", held.Counter, Write{}); err != nil {
		t.Fatalf("hold after Fail(Hold, nil): %v", err)
	}
	if len(m.Workers()) != 0 {
		t.Fatalf("a failed heartbeat wrote %+v", m.Workers())
	}
}

// TestMemoryFailUnknownOp: a misspelt method, or one that cannot fail,
// panics instead of never failing.
func TestMemoryFailUnknownOp(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"hold", "Heartbeats", "Name"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Fail(%q) did not panic", op)
				}
			}()
			NewMemory().Fail(op, errors.New("x"))
		}()
	}
}

// TestMemoryDoneContext: a call with a done context fails with its error,
// as an SDK call does.
func TestMemoryDoneContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewMemory().Scan(ctx, arn); !errors.Is(err, context.Canceled) {
		t.Fatalf("scan with a cancelled context: %v", err)
	}
}

// TestMemorySnapshots: SetShard plants an item as it is; Items and Workers
// list every stream's items in order, and share nothing with the table.
func TestMemorySnapshots(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := NewMemory()
	planted := Shard{Stream: arn, ShardID: "shardId-000000000001", Owner: "a", Counter: 41, HandoffTo: "b", Parents: []string{"shardId-000000000000"},
		Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Position: &checkpoint.Position{Sequence: "7"}}}
	m.SetShard(planted)
	mustCreate(t, m, "shardId-000000000000")
	items := m.Items()
	if len(items) != 2 || items[0].ShardID != "shardId-000000000000" || !reflect.DeepEqual(items[1], planted) {
		t.Fatalf("items: %+v; want the created item, then the planted one as planted", items)
	}
	items[1].Parents[0] = "changed"
	got, err := m.Hold(ctx, arn, planted.ShardID, "a", 41, Write{Release: true, HandOver: "b"})
	if err != nil || got.Owner != "b" || got.Counter != 42 || got.Parents[0] != "shardId-000000000000" {
		t.Fatalf("handover of the planted item: %+v, %v", got, err)
	}
	for _, id := range []string{"b", "a"} {
		if err := m.Heartbeat(ctx, arn, id, Presence{Nonce: "n-" + id}, false); err != nil {
			t.Fatal(err)
		}
	}
	a, b := counterBase(Presence{Nonce: "n-a"}), counterBase(Presence{Nonce: "n-b"})
	if w := m.Workers(); !reflect.DeepEqual(w, []Worker{{ID: "a", Counter: a + 1, Nonce: "n-a", Held: map[string]bool{}, Listed: true}, {ID: "b", Counter: b + 1, Nonce: "n-b", Held: map[string]bool{}, Listed: true}}) {
		t.Fatalf("workers: %+v", w)
	}
}

// TestMemoryTakeIsAtomic: of many instances taking one scanned lease at
// once, exactly one gets it.
func TestMemoryTakeIsAtomic(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	it := mustCreate(t, m, "shardId-000000000000")
	var won atomic.Int32
	var wg sync.WaitGroup
	for _, me := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		wg.Go(func() {
			_, err := m.Take(t.Context(), it, me, "")
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, ErrLost):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d takes of one scanned lease succeeded, want 1", n)
	}
}

func mustCreate(t *testing.T, st Store, id string) Shard {
	t.Helper()
	s, _, err := st.Create(t.Context(), Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
