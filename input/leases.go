package input

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// Causes of a reader's stop, set on its context.
var (
	errLeaseLost    = errors.New("the shard's lease was taken by another instance")
	errLeaseExpired = errors.New("the shard's lease was not renewed within lease_period")
	errHandoff      = errors.New("the shard's lease is handed over to another instance")
)

// leases is what one instance knows of a stream's lease table: the leases it
// holds, and what it has seen of the others. The positions of a stream with
// a lease table hold one; the stream's run loop takes leases (cycle), the
// commit path renews them.
type leases struct {
	table  *lease.Table
	arn    string
	me     string
	period time.Duration
	steals int

	mu   sync.Mutex
	held map[string]*heldLease // by shard id
	// seen is the last owner and counter of every shard and worker item, and
	// when this instance saw them change, by its own clock: a lease counts as
	// expired once it did not move for a lease period.
	seen map[string]sighting // by leaseKey
	// items is the last scan's shard items, by shard id.
	items map[string]lease.Shard
	// workers are the instances whose presence moved within a lease period.
	workers map[string]bool
	gen     int64
	// beat is the last successful heartbeat of this instance's worker item.
	beat time.Time
	// asked holds the shards this instance asked the holders of for, and
	// when: a scan may not show an ask yet, and an ask counts as coming for
	// a lease period.
	asked map[string]time.Time
}

// heldLease is a lease this instance holds.
type heldLease struct {
	counter int64
	// gen is the generation of the reader allowed to move the shard's
	// checkpoint: 0 while none reads it.
	gen     int64
	stop    context.CancelCauseFunc // the reader's, nil while none reads
	renewed time.Time               // the last successful write
	written checkpoint.Checkpoint   // as last written
	// handoff is the instance the lease goes to once its reader stopped and
	// its last acknowledgement is written.
	handoff string
	// clearAsk is set when an instance that is not alive asked for the
	// lease: the next write removes the request, so that others may ask.
	clearAsk bool
	// uncertain is set when a write failed without an answer: it may have
	// been applied, moving the counter (see leaseWriteFailed).
	uncertain bool
}

type sighting struct {
	owner   string
	counter int64
	at      time.Time
}

func newLeases(table *lease.Table, arn string, c *leaseConfig) *leases {
	return &leases{
		table: table, arn: arn, me: c.InstanceID, period: c.LeasePeriod, steals: c.StealLimit,
		held: map[string]*heldLease{}, seen: map[string]sighting{}, items: map[string]lease.Shard{}, workers: map[string]bool{},
		asked: map[string]time.Time{},
	}
}

// holds reports whether the lease of a shard is held and still valid.
func (l *leases) holds(shardID string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[shardID]
	return ok && h.handoff == "" && now.Sub(h.renewed) < l.period
}

// startReading records the reader of a held shard and returns its
// generation; 0 when the lease is not held, lapsed, or being handed over.
func (l *leases) startReading(shardID string, stop context.CancelCauseFunc) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[shardID]
	if !ok || h.handoff != "" || time.Since(h.renewed) >= l.period {
		return 0
	}
	l.gen++
	h.gen, h.stop = l.gen, stop
	return h.gen
}

// readerEnded records that the reader of generation gen has stopped, for
// whatever reason; it reports whether the lease is being handed over, in
// which case that reader's acknowledgements still count until the handover
// (see streamReader.handOver). Otherwise they no longer do.
func (l *leases) readerEnded(shardID string, gen int64) (handingOver bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[shardID]
	if !ok || h.gen != gen {
		return false
	}
	h.stop = nil
	if h.handoff != "" {
		return true
	}
	h.gen = 0
	return false
}

// current reports whether gen is the generation of the reader of a held
// shard: only that reader's acknowledgements move the checkpoint.
func (l *leases) current(shardID string, gen int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[shardID]
	return ok && gen != 0 && h.gen == gen
}

// readableFor reports how long the reader of generation gen may still hand
// out records: while its lease is held, not being handed over, and renewed
// within the lease period. Not positive: no longer.
func (l *leases) readableFor(shardID string, gen int64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[shardID]
	if !ok || h.gen != gen || h.handoff != "" {
		return 0
	}
	return time.Until(h.renewed.Add(l.period))
}

// count is the number of leases held.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// lose forgets a held lease and stops its reader at once.
func (l *leases) lose(shardID string, cause error) {
	l.mu.Lock()
	h, ok := l.held[shardID]
	delete(l.held, shardID)
	l.mu.Unlock()
	if ok && h.stop != nil {
		h.stop(cause)
	}
}

// fence stops the readers of leases not renewed within the lease period
// (the lease is kept: a later renewal that succeeds lets it be read again).
func (l *leases) fence(now time.Time) (stopped []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, h := range l.held {
		if h.stop != nil && now.Sub(h.renewed) >= l.period {
			h.stop(errLeaseExpired)
			h.stop, h.gen = nil, 0
			stopped = append(stopped, id)
		}
	}
	return stopped
}

// observe takes in a scan: who holds what, since when by this instance's
// clock, and which instances live. A held lease the scan shows taken by
// someone else is lost.
func (l *leases) observe(sc lease.Scan, now time.Time) (lost []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = map[string]lease.Shard{}
	keys := map[string]bool{}
	see := func(key, owner string, counter int64) {
		keys[key] = true
		if s, ok := l.seen[key]; ok && s.owner == owner && s.counter == counter {
			return
		}
		l.seen[key] = sighting{owner: owner, counter: counter, at: now}
	}
	for _, w := range sc.Workers {
		key := "worker:" + w.ID
		see(key, w.ID, w.Counter)
		l.workers[w.ID] = w.ID == l.me || now.Sub(l.seen[key].at) < l.period
	}
	for id := range l.workers {
		if !keys["worker:"+id] {
			delete(l.workers, id)
		}
	}
	for _, it := range sc.Shards {
		l.items[it.ShardID] = it
		see(it.Key(), it.Owner, it.Counter)
		// A scan may be older than this instance's last write, never newer
		// than another instance's take: only a higher counter under another
		// owner means the lease was taken.
		if h, ok := l.held[it.ShardID]; ok && it.Owner != l.me && it.Counter > h.counter {
			lost = append(lost, it.ShardID)
		}
	}
	for key := range l.seen {
		if !keys[key] {
			delete(l.seen, key)
		}
	}
	return lost
}

// expired reports whether the lease of an item counts as expired: held by
// another instance whose counter did not move for a lease period by this
// instance's clock.
func (l *leases) expired(it lease.Shard, now time.Time) bool {
	s, ok := l.seen[it.Key()]
	return it.Owner != "" && it.Owner != l.me && ok && now.Sub(s.at) >= l.period
}

// nextCycle is how long until the next lease cycle: a third of a lease
// period, or sooner when a lease of another instance would expire before
// then, so that a dead instance's leases are taken as soon as they expire
// (within a lease period and a third of its last renewal, instead of up to
// two lease periods).
func (l *leases) nextCycle(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.period / 3
	for _, it := range l.items {
		if it.Owner == "" || it.Owner == l.me || it.Checkpoint.Ended {
			continue
		}
		s, ok := l.seen[it.Key()]
		if !ok {
			continue
		}
		if d := s.at.Add(l.period).Sub(now); d > 0 && d < next {
			next = d
		}
	}
	return max(next+5*time.Millisecond, 10*time.Millisecond)
}

// askedAt returns when this instance asked for a shard's lease, if it did
// within the last lease period.
func (l *leases) askedAt(shardID string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.asked[shardID]
	return at, ok
}

// setAsked records an ask, and forgets those older than a lease period.
func (l *leases) setAsked(shardID string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, t := range l.asked {
		if at.Sub(t) >= l.period {
			delete(l.asked, id)
		}
	}
	l.asked[shardID] = at
}
