package input

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

func pos(n int) checkpoint.Position { return checkpoint.Position{Sequence: strconv.Itoa(n)} }

func TestAckTrackerOutOfOrderAcks(t *testing.T) {
	tr := newAckTracker(100)
	ctx := context.Background()
	var es []*tracked
	for i := 1; i <= 5; i++ {
		e, err := tr.Track(ctx, pos(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if _, moved := tr.Ack(es[2], nil); moved {
		t.Fatal("checkpoint moved past unacknowledged batches 1 and 2")
	}
	if p, moved := tr.Ack(es[0], nil); !moved || p != pos(1) {
		t.Fatalf("after acking 1: %v %v", p, moved)
	}
	if p, moved := tr.Ack(es[1], nil); !moved || p != pos(3) {
		t.Fatalf("after acking 2 (3 already acked): %v %v", p, moved)
	}
	tr.Ack(es[4], nil)
	if got := tr.Checkpoint(); *got != pos(3) {
		t.Fatalf("checkpoint %v passed unacknowledged 4", got)
	}
	if p, _ := tr.Ack(es[3], nil); p != pos(5) {
		t.Fatalf("final checkpoint %v", p)
	}
	if err := tr.Drained(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAckTrackerNackFreezes(t *testing.T) {
	tr := newAckTracker(100)
	ctx := context.Background()
	e1, _ := tr.Track(ctx, pos(1), 1)
	e2, _ := tr.Track(ctx, pos(2), 1)
	e3, _ := tr.Track(ctx, pos(3), 1)
	tr.Ack(e2, errors.New("rejected"))
	tr.Ack(e3, nil)
	if p, _ := tr.Ack(e1, nil); p != pos(1) {
		t.Fatalf("checkpoint %v, want 1 (2 was nacked)", p)
	}
	e4, _ := tr.Track(ctx, pos(4), 1)
	tr.Ack(e4, nil)
	if got := tr.Checkpoint(); *got != pos(1) {
		t.Fatalf("checkpoint passed a nacked record: %v", got)
	}
	if !tr.Frozen() {
		t.Fatal("not frozen")
	}
	ctx2, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := tr.Drained(ctx2); err == nil {
		t.Fatal("a frozen tracker reported drained: the shard would be ended past a nacked record")
	}
}

func TestAckTrackerLimitBlocks(t *testing.T) {
	tr := newAckTracker(10)
	ctx := context.Background()
	e1, _ := tr.Track(ctx, pos(1), 6)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Track(tctx, pos(2), 5); err == nil {
		t.Fatal("Track admitted 11 unacknowledged records with a limit of 10")
	}
	done := make(chan *tracked)
	go func() {
		e, _ := tr.Track(ctx, pos(2), 5)
		done <- e
	}()
	select {
	case <-done:
		t.Fatal("Track did not wait for room")
	case <-time.After(20 * time.Millisecond):
	}
	tr.Ack(e1, nil)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Track did not wake after an ack")
	}
	// A batch larger than the limit is admitted alone.
	tr2 := newAckTracker(10)
	if _, err := tr2.Track(ctx, pos(1), 50); err != nil {
		t.Fatal(err)
	}
}

// TestAckTrackerRandomOrder acks many batches in random order from many
// goroutines: the checkpoint must only grow, never pass an unacknowledged
// batch, and end at the last one.
func TestAckTrackerRandomOrder(t *testing.T) {
	tr := newAckTracker(1 << 20)
	ctx := context.Background()
	const n = 2000
	es := make([]*tracked, n)
	for i := range es {
		es[i], _ = tr.Track(ctx, pos(i+1), 1)
	}
	acked := make([]bool, n)
	order := rand.Perm(n)
	last := 0
	for _, i := range order {
		acked[i] = true
		p, moved := tr.Ack(es[i], nil)
		if !moved {
			continue
		}
		got, _ := strconv.Atoi(p.Sequence)
		if got < last {
			t.Fatalf("checkpoint went back from %d to %d", last, got)
		}
		for j := 0; j < got; j++ {
			if !acked[j] {
				t.Fatalf("checkpoint %d passed unacknowledged %d", got, j+1)
			}
		}
		last = got
	}
	if last != n {
		t.Fatalf("final checkpoint %d, want %d", last, n)
	}
}
