package read

import (
	"sync"

	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
)

// roomLedger is the room of the input's memory budget (memory_limit) that
// one shard reader's messages hold, from their conversion until the
// pipeline resolves them. A read arrives holding room for its records
// (shard.Batch.Room); as its records are converted, their room moves here
// with the messages they became. A read's messages share its buffers (one
// for the data of all its records, one for their strings), which are freed
// only when the last of them is: so a read's room is given back whole once
// all of its messages are resolved (acknowledged, or rejected into the
// replay queue), not message by message. Messages are taken as resolved in
// the order they were converted: a shard's acknowledgements may come out of
// order, which gives a read's room back a little late, never early by more
// than the messages acknowledged ahead of it.
//
// Its methods are safe for concurrent use: acknowledgements arrive on the
// pipeline's goroutines.
type roomLedger struct {
	budget *membudget.Budget // nil: no limit, and the ledger keeps nothing

	mu       sync.Mutex
	reads    []heldRead // oldest first
	resolved int        // messages resolved and not yet set against reads
}

// heldRead is the room of one read's messages.
type heldRead struct {
	msgs   int   // converted so far
	bytes  int64 // room moved here with them
	closed bool  // every record of the read is converted
}

// shareOf takes from *room, the room of records [from, total) of a read,
// the share of records [from, to), and returns it.
func shareOf(room *int64, from, to, total int) int64 {
	share := *room
	if to < total && total > from {
		share = *room * int64(to-from) / int64(total-from)
	}
	*room -= share
	return share
}

// charge moves the room of records [from, to) of a read of total records,
// whose records [from, total) hold *room, to the m messages they became.
func (l *roomLedger) charge(room *int64, from, to, total, m int) {
	share := shareOf(room, from, to, total)
	if l.budget == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A read's parts come in order, each read's after the last one's
	// (a part may end inside an aggregate, so a read's second part may
	// start from record 0 again): a new read starts once the last closed.
	if len(l.reads) == 0 || l.reads[len(l.reads)-1].closed {
		l.reads = append(l.reads, heldRead{})
	}
	r := &l.reads[len(l.reads)-1]
	r.msgs += m
	r.bytes += share
	r.closed = to >= total
	l.settleLocked()
}

// flushed takes in m messages a batch policy flushed, holding bytes of room
// it forces on the budget: while they waited in the batcher their room was
// given back (see shardReader.handle), so that a batch waiting for more
// records never holds the room those records need.
func (l *roomLedger) flushed(m int, bytes int64) {
	if l.budget == nil || m == 0 {
		return
	}
	l.budget.Force(bytes)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads = append(l.reads, heldRead{msgs: m, bytes: bytes, closed: true})
	l.settleLocked()
}

// resolve sets n messages resolved against the oldest reads, giving back
// the room of those whose messages are all resolved.
func (l *roomLedger) resolve(n int) {
	if l.budget == nil || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resolved += n
	l.settleLocked()
}

// settleLocked gives back the room of the oldest reads that are closed and
// resolved.
func (l *roomLedger) settleLocked() {
	var give int64
	i := 0
	for ; i < len(l.reads); i++ {
		r := l.reads[i]
		if !r.closed || r.msgs > l.resolved {
			break
		}
		l.resolved -= r.msgs
		give += r.bytes
	}
	if i > 0 {
		l.reads = append(l.reads[:0], l.reads[i:]...)
	}
	if len(l.reads) == 0 {
		l.resolved = 0 // nothing converted is left to resolve
	}
	if give > 0 {
		l.budget.Give(give)
	}
}

// exited gives back, once the reader stopped, the room of the messages
// that never reached the pipeline: all but the inflight ones, whose reads
// keep their room until those are resolved.
func (l *roomLedger) exited(inflight int) {
	if l.budget == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	pending := -l.resolved
	for i := range l.reads {
		l.reads[i].closed = true
		pending += l.reads[i].msgs
	}
	// The newest messages are those that never reached the pipeline.
	drop := pending - inflight
	for drop > 0 && len(l.reads) > 0 {
		last := &l.reads[len(l.reads)-1]
		if last.msgs > drop {
			last.msgs -= drop
			break
		}
		drop -= last.msgs
		l.budget.Give(last.bytes)
		l.reads = l.reads[:len(l.reads)-1]
	}
	l.settleLocked()
}

// give gives back room of records that never reached the reader (or
// became nothing it keeps).
func (l *roomLedger) give(bytes int64) {
	if l.budget != nil {
		l.budget.Give(bytes)
	}
}
