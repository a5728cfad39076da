package read

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

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

// Regression tests of checkpoint.limit against outputs that batch by count
// (no period) and so acknowledge only once more records come: the limit must
// never make the shard wait for acknowledgements that wait for the shard. A
// review proved each with a failing test: the first five against a version
// of the limit (since reverted) that counted acknowledged records behind an
// unacknowledged one; the last against reads emitted in batches larger than
// the room left.

// TestAckTrackerAcknowledgedRecordsFreeTheirRoom models a Benthos output with
// batching { count: 4 } (no period) behind pipeline.threads: 2, where the
// first record is slow in its thread: the output writes (and so acknowledges)
// records 2-5 and 6-9, then holds 10 and, once it arrives, 1, waiting for two
// more messages before it acknowledges them. Those two can only come from the
// shard, so the acknowledged records must free their room even though the
// checkpoint cannot pass record 1.
func TestAckTrackerAcknowledgedRecordsFreeTheirRoom(t *testing.T) {
	const limit, outCount = 10, 4
	tr := newAckTracker(limit)
	ctx := context.Background()
	es := make([]*tracked, 0, limit)
	for i := 1; i <= limit; i++ {
		e, err := tr.Track(ctx, pos(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	// Output batches {2,3,4,5} and {6,7,8,9} are written; {10,1} waits.
	for i := 2; i <= 9; i++ {
		tr.Ack(es[i-1], nil)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := tr.Track(tctx, pos(limit+1), 1); err != nil {
		t.Fatalf("with 2 records unacknowledged (both waiting in an output batch of %d for more) and checkpoint.limit %d, the shard cannot read its next record: %v", outCount, limit, err)
	}
}

// TestAckTrackerFreezeOfAFullBatchLeavesRoom: with auto_replay_nacks false
// a nack freezes the checkpoint and the shard reads on, also after the nack
// of a batch of checkpoint.limit records (what a busy shard emits): the
// nacked batch must not count against the limit for good.
func TestAckTrackerFreezeOfAFullBatchLeavesRoom(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, 10} {
		tr := newAckTracker(10)
		e, _ := tr.Track(ctx, pos(size), size)
		tr.Ack(e, errors.New("rejected"))
		for i := 1; i <= 3; i++ {
			tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			next, err := tr.Track(tctx, pos(size+i), 1)
			cancel()
			if err != nil {
				t.Fatalf("after the nack of a batch of %d (auto_replay_nacks false), the shard cannot read on (limit 10)", size)
			}
			tr.Ack(next, nil)
		}
	}
}

// TestAckTrackerMemoryBehindAStuckBatch: a batch that stays unacknowledged
// (a record the output keeps rejecting, replayed for ever) must not make
// every later acknowledged batch stay queued behind it. Before the fix,
// 200,000 later reads left 200,001 queue entries (about 73 bytes each); the
// queue now holds the unacknowledged batches and at most one merged run of
// acknowledged ones between them.
func TestAckTrackerMemoryBehindAStuckBatch(t *testing.T) {
	t.Parallel()
	tr := newAckTracker(1024)
	ctx := context.Background()
	stuck, _ := tr.Track(ctx, pos(0), 1)
	var inFlight []*tracked
	for i := 1; i <= 200_000; i++ {
		e, err := tr.Track(ctx, pos(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		inFlight = append(inFlight, e)
		if len(inFlight) == 8 { // acknowledged out of order, a few in flight
			for _, j := range []int{3, 0, 7, 1, 2, 6, 4, 5} {
				if _, moved := tr.Ack(inFlight[j], nil); moved {
					t.Fatal("the checkpoint passed the stuck batch")
				}
			}
			inFlight = inFlight[:0]
		}
		if tr.queue.entries > 2+2*len(inFlight) {
			t.Fatalf("after %d reads the queue holds %d entries for %d unacknowledged batches", i, tr.queue.entries, 1+len(inFlight))
		}
	}
	if got := tr.Behind(); got != 200_001 {
		t.Fatalf("%d records past the checkpoint, want 200001", got)
	}
	p, moved := tr.Ack(stuck, nil)
	if !moved || p != pos(200_000) {
		t.Fatalf("once the stuck batch is acknowledged the checkpoint is %v (moved %v), want 200000", p, moved)
	}
	if tr.queue.entries != 0 || tr.Behind() != 0 {
		t.Fatalf("%d entries and %d records behind after everything was acknowledged", tr.queue.entries, tr.Behind())
	}
}

// TestAckTrackerMergesInAnyOrder: whatever the order of acknowledgements,
// the checkpoint is the end of the longest acknowledged prefix, and the
// records behind it add up.
func TestAckTrackerMergesInAnyOrder(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := newAckTracker(1 << 20)
		ctx := context.Background()
		n := 1 + rng.IntN(40)
		es := make([]*tracked, n)
		sizes := make([]int, n)
		for i := range es {
			sizes[i] = 1 + rng.IntN(5)
			es[i], _ = tr.Track(ctx, pos(i), sizes[i])
		}
		acked := make([]bool, n)
		for _, i := range rng.Perm(n) {
			tr.Ack(es[i], nil)
			acked[i] = true
			prefix, behind := -1, 0
			for prefix+1 < n && acked[prefix+1] {
				prefix++
			}
			for j := prefix + 1; j < n; j++ {
				behind += sizes[j]
			}
			cp := tr.Checkpoint()
			if (prefix < 0) != (cp == nil) || (cp != nil && *cp != pos(prefix)) {
				t.Fatalf("seed %d: checkpoint %v, want the end of the acknowledged prefix %d", seed, cp, prefix)
			}
			if tr.Behind() != behind {
				t.Fatalf("seed %d: %d records behind, want %d", seed, tr.Behind(), behind)
			}
		}
	}
}
