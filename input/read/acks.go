package read

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
// limit is admitted alone); Track blocks until there is room. With strict,
// at most one batch is: Track blocks until every earlier one is resolved.
//
// Memory stays proportional to the unacknowledged batches, not to what was
// read: acknowledged neighbours in the queue are merged into one entry, so a
// batch that stays unacknowledged (a record the output keeps rejecting while
// it is replayed) does not make every later batch stay queued behind it.
type ackTracker struct {
	limit  int
	strict bool
	// report, when set, is told of every change of behind and pending,
	// under the lock (so a gauge never ends on a stale value).
	report func(behind, pending int)
	// resolved, when set, is told of the records of every batch resolved
	// (acknowledged or rejected), under the lock: the room ledger must
	// count them in the same step as pending, or withPending's exited
	// could give back room a resolve then gives back again. Hence the
	// package's lock order (see the package comment).
	resolved func(n int)

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever pending drops
	pending int           // records handed out and not yet acknowledged
	// queue holds the undetached batches in read order, not yet popped;
	// never two acknowledged entries side by side.
	queue trackedList
	// behind counts the records read past the checkpoint, acknowledged or
	// not, detached included: all of them come again after a restart.
	behind int
	last   *checkpoint.Position
	frozen bool // a batch was nacked: last never moves again
}

// tracked is one batch in flight, or (once acknowledged) a run of
// acknowledged batches ending at pos.
type tracked struct {
	pos      checkpoint.Position // of the batch's last record
	n        int                 // records of the batch
	span     int                 // records the entry stands for: n, plus merged runs before it
	acked    bool
	nacked   bool
	detached bool // behind a nacked batch: only counted, never checkpointed

	prev, next *tracked
}

func newAckTracker(limit int) *ackTracker {
	if limit < 1 {
		limit = 1
	}
	return &ackTracker{limit: limit, changed: make(chan struct{})}
}

// full reports whether a batch of n records must wait. Must hold t.mu.
func (t *ackTracker) full(n int) bool {
	if t.strict {
		return t.pending > 0
	}
	return t.pending > 0 && t.pending+n > t.limit
}

// Track registers a batch of n records ending at pos, waiting while the
// tracker is full. It fails only when ctx ends.
func (t *ackTracker) Track(ctx context.Context, pos checkpoint.Position, n int) (*tracked, error) {
	t.mu.Lock()
	for t.full(n) {
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
	return t.track(pos, n), nil
}

// TryTrack registers a batch as Track does if that needs no wait; else it
// returns nil.
func (t *ackTracker) TryTrack(pos checkpoint.Position, n int) *tracked {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.full(n) {
		return nil
	}
	return t.track(pos, n)
}

// track registers a batch. Must hold t.mu.
func (t *ackTracker) track(pos checkpoint.Position, n int) *tracked {
	e := &tracked{pos: pos.Detached(), n: n, span: n}
	t.pending += n
	t.addBehind(n)
	if t.frozen {
		e.detached = true
	} else {
		t.queue.push(e)
	}
	return e
}

// Idle returns a channel that is closed once no batch is unacknowledged: it
// may be closed earlier (whenever the count drops), so check again.
func (t *ackTracker) Idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == 0 {
		return closedChan
	}
	return t.changed
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Room is how many records Track admits now without waiting; at least 1,
// which waits for an empty tracker when nothing fits. With strict it is the
// limit: the next batch waits for the previous one in any case.
func (t *ackTracker) Room() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.strict {
		return t.limit
	}
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
	e.pos = pos.Detached()
	e.n += n
	e.span += n
	t.pending += n
	t.addBehind(n)
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
	if t.resolved != nil {
		t.resolved(e.n)
	}
	t.reportCounts()
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
		return checkpoint.Position{}, false
	}
	// Merge e with acknowledged neighbours: the checkpoint can only pass
	// them together, and it then lands on the later one's position.
	if p := e.prev; p != nil && p.acked {
		e.span += p.span
		t.queue.remove(p)
	}
	if nx := e.next; nx != nil && nx.acked {
		nx.span += e.span
		t.queue.remove(e)
	}
	if h := t.queue.head; h == nil || !h.acked {
		return checkpoint.Position{}, false
	}
	// Neighbours are never both acknowledged, so one pop is all there is.
	h := t.queue.head
	p := h.pos
	t.last = &p
	t.addBehind(-h.span)
	t.queue.remove(h)
	return p, true
}

// freezeAt detaches every batch after the nacked one e: the checkpoint can
// never pass e, so they no longer matter to it.
func (t *ackTracker) freezeAt(e *tracked) {
	t.frozen = true
	for q := e.next; q != nil; q = q.next {
		q.detached = true
		t.queue.entries--
	}
	e.next = nil // the detached batches leave the list with it
	t.queue.tail = e
}

// addBehind changes behind by n. Must hold t.mu.
func (t *ackTracker) addBehind(n int) {
	t.behind += n
	t.reportCounts()
}

// reportCounts tells report the records behind and pending. Must hold t.mu.
func (t *ackTracker) reportCounts() {
	if t.report != nil {
		t.report(t.behind, t.pending)
	}
}

// trackedList is a doubly linked list of tracked batches.
type trackedList struct {
	head, tail *tracked
	entries    int
}

func (l *trackedList) push(e *tracked) {
	e.prev = l.tail
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.entries++
}

func (l *trackedList) remove(e *tracked) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	l.entries--
}

// withPending calls f with the records handed out and not yet resolved,
// under the lock: no batch is resolved meanwhile.
func (t *ackTracker) withPending(f func(pending int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.pending)
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

// Behind returns how many records were read past the checkpoint: all of them
// would be read again after a restart now.
func (t *ackTracker) Behind() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.behind
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
	return t.await(ctx, func() bool { return t.pending == 0 && !t.frozen })
}

// Settled waits until no tracked batch waits for its acknowledgement: each
// was acknowledged, rejected, or never handed out (errNotHandedOut). Unlike
// Drained it returns on a frozen tracker: nothing more can come.
func (t *ackTracker) Settled(ctx context.Context) error {
	return t.await(ctx, func() bool { return t.pending == 0 })
}

// await waits until done, checked under t.mu at every change, or ctx ends.
func (t *ackTracker) await(ctx context.Context, done func() bool) error {
	for {
		t.mu.Lock()
		ok := done()
		changed := t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
