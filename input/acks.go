package input

import (
	"context"
	"sync"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// ackTracker follows the batches of one shard from the moment they are handed
// to Benthos until they are acknowledged, in read order. Its checkpoint is the
// position of the last batch of the longest fully acknowledged prefix: a
// position is never reported while anything before it is unacknowledged.
//
// A batch acknowledged with an error (a nack that Benthos will not replay)
// freezes the checkpoint just before that batch for the life of the tracker:
// the record is read again after a restart, never skipped.
//
// At most limit records are unacknowledged at once (one batch larger than the
// limit is admitted alone); Track blocks until there is room.
type ackTracker struct {
	limit int

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever pending drops
	pending int           // records handed out and not yet acknowledged
	queue   []*tracked    // undetached batches in read order, not yet popped
	last    *checkpoint.Position
	frozen  bool // a batch was nacked: last never moves again
}

// tracked is one batch in flight.
type tracked struct {
	pos      checkpoint.Position // of the batch's last record
	n        int
	acked    bool
	nacked   bool
	detached bool // behind a nacked batch: only counted, never checkpointed
}

func newAckTracker(limit int) *ackTracker {
	if limit < 1 {
		limit = 1
	}
	return &ackTracker{limit: limit, changed: make(chan struct{})}
}

// Track registers a batch of n records ending at pos, waiting while the
// tracker is full. It fails only when ctx ends.
func (t *ackTracker) Track(ctx context.Context, pos checkpoint.Position, n int) (*tracked, error) {
	t.mu.Lock()
	for t.pending > 0 && t.pending+n > t.limit {
		changed := t.changed
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
		t.mu.Lock()
	}
	defer t.mu.Unlock()
	e := &tracked{pos: pos, n: n}
	t.pending += n
	if t.frozen {
		e.detached = true
	} else {
		t.queue = append(t.queue, e)
	}
	return e, nil
}

// Room is how many records Track admits now without waiting; at least 1,
// which waits for an empty tracker when nothing fits.
func (t *ackTracker) Room() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(1, t.limit-t.pending)
}

// Grow extends e, the batch tracked last and not yet handed out, by n
// records ending at pos, if that keeps the unacknowledged records within the
// limit. It reports whether it did.
func (t *ackTracker) Grow(e *tracked, pos checkpoint.Position, n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending+n > t.limit || e.acked || e.nacked {
		return false
	}
	e.pos = pos
	e.n += n
	t.pending += n
	return true
}

// Ack resolves a batch: err nil for success, non-nil for a nack. It returns
// the new checkpoint when it moved.
func (t *ackTracker) Ack(e *tracked, err error) (checkpoint.Position, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.acked || e.nacked {
		return checkpoint.Position{}, false // resolved twice: ignore
	}
	t.pending -= e.n
	close(t.changed)
	t.changed = make(chan struct{})
	if err != nil {
		e.nacked = true
	} else {
		e.acked = true
	}
	if e.detached {
		return checkpoint.Position{}, false
	}
	if e.nacked {
		t.freezeAt(e)
	}
	moved := false
	for len(t.queue) > 0 && t.queue[0].acked {
		p := t.queue[0].pos
		t.last = &p
		t.queue[0] = nil
		t.queue = t.queue[1:]
		moved = true
	}
	if !moved {
		return checkpoint.Position{}, false
	}
	return *t.last, true
}

// freezeAt detaches every batch after the nacked one e: the checkpoint can
// never pass e, so they no longer matter to it.
func (t *ackTracker) freezeAt(e *tracked) {
	t.frozen = true
	for i, q := range t.queue {
		if q == e {
			for _, later := range t.queue[i+1:] {
				later.detached = true
			}
			t.queue = t.queue[:i+1]
			return
		}
	}
}

// Checkpoint returns the current checkpoint, nil before the first.
func (t *ackTracker) Checkpoint() *checkpoint.Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		return nil
	}
	p := *t.last
	return &p
}

// Frozen reports whether a nack froze the checkpoint.
func (t *ackTracker) Frozen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.frozen
}

// Drained waits until every tracked batch is acknowledged, so that the last
// position is final. It never returns nil on a frozen tracker (the nacked
// record must be read again), only when ctx ends.
func (t *ackTracker) Drained(ctx context.Context) error {
	for {
		t.mu.Lock()
		done := t.pending == 0 && !t.frozen
		changed := t.changed
		t.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
