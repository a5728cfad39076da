package leasecoord

import (
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// leaseView is what one instance has seen of the other instances on a
// stream's lease table, by its own clock: when each lease item and each
// worker item last changed, and the asks it made. Expiry is judged here,
// never by comparing clocks across hosts. Its lock is a leaf of the lock
// order (see the package comment).
type leaseView struct {
	me     string
	period time.Duration

	mu sync.Mutex
	// items is the last scan's shard items, by shard id; since is when
	// each one's owner and counter were first seen as they are now.
	items map[string]lease.Shard
	since map[string]time.Time
	// workers holds every worker item seen, by instance.
	workers map[string]workerSighting
	// loads holds the loads each instance published with its last
	// heartbeat: bytes a second by shard, by instance.
	loads map[string]map[string]float64
	// started is when this instance's first lease cycle ran: until half a
	// lease period later it waits for instances it sees for the first time
	// to move before it takes free leases (see settling).
	started time.Time
	// settled is when that wait ended.
	settled time.Time
	// asked holds the shards this instance asked the holders of for, and
	// when: a scan may not show an ask yet, and an ask counts as coming
	// for a lease period.
	asked map[string]askMade
}

// askMade is an ask this instance made: when, and why (the balance by
// count or by load).
type askMade struct {
	at  time.Time
	why string
}

// workerSighting is a worker item as seen: its counter, since when, and
// whether it was ever seen to move. A worker seen for the first time is
// not alive until its counter moves: a crashed instance's item never does.
type workerSighting struct {
	counter int64
	at      time.Time
	moved   bool
}

func newLeaseView(me string, period time.Duration) *leaseView {
	return &leaseView{me: me, period: period, items: map[string]lease.Shard{}, since: map[string]time.Time{},
		workers: map[string]workerSighting{}, asked: map[string]askMade{}}
}

// observe takes in a scan made at now.
func (v *leaseView) observe(sc lease.Scan, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	items := map[string]lease.Shard{}
	for _, it := range sc.Shards {
		items[it.ShardID] = it
		if old, ok := v.items[it.ShardID]; !ok || old.Owner != it.Owner || old.Counter != it.Counter {
			v.since[it.ShardID] = now
		}
	}
	for id := range v.since {
		if _, ok := items[id]; !ok {
			delete(v.since, id)
		}
	}
	v.items = items
	workers := map[string]workerSighting{}
	v.loads = make(map[string]map[string]float64, len(sc.Workers))
	for _, w := range sc.Workers {
		v.loads[w.ID] = w.Loads
		s, ok := v.workers[w.ID]
		switch {
		case !ok:
			s = workerSighting{counter: w.Counter, at: now}
		case s.counter != w.Counter:
			s = workerSighting{counter: w.Counter, at: now, moved: true}
		}
		workers[w.ID] = s
	}
	v.workers = workers
}

// load returns the load of a shard as its holder owner published it, and
// whether it did.
func (v *leaseView) load(shardID, owner string) (float64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	l, ok := v.loads[owner][shardID]
	return l, ok
}

// expired reports whether the lease of an item counts as expired: held by
// another instance, and for a lease period by this instance's clock
// neither its item (owner and counter) nor its owner's worker item moved.
// The holder's heartbeat renews its leases: it reads a shard only within
// a lease period of the later of its last heartbeat and its last write of
// the item, each sent before this instance could see it.
func (v *leaseView) expired(it lease.Shard, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if it.Owner == "" || it.Owner == v.me {
		return false
	}
	at, ok := v.expiresAt(it.ShardID, it.Owner)
	return ok && !now.Before(at)
}

// expiresAt is when the lease of a shard held by owner expires, as things
// stand: a lease period after the later of its item's last change and its
// owner's worker item's last move, as this instance saw them. Must hold
// v.mu.
func (v *leaseView) expiresAt(shardID, owner string) (time.Time, bool) {
	at, ok := v.since[shardID]
	if !ok {
		return time.Time{}, false
	}
	// A worker item not in the scan (its owner left, or was removed as
	// dead) renews nothing.
	if w, ok := v.workers[owner]; ok && w.at.After(at) {
		at = w.at
	}
	return at.Add(v.period), true
}

// live returns the instances alive at now: this one, and those whose
// worker item moved within the lease period.
func (v *leaseView) live(now time.Time) map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	live := map[string]bool{v.me: true}
	for id, s := range v.workers {
		if s.moved && now.Sub(s.at) < v.period {
			live[id] = true
		}
	}
	return live
}

// settling reports whether this instance, just started, still waits to
// learn who else is alive before it takes free leases, and until when: for
// at most half a lease period after its first cycle (a live instance's
// heartbeat moves at least that often), while an instance it saw for the
// first time has not moved yet. Instances starting together then count
// each other, and split the free leases at once instead of the first one
// taking them all and handing them on one by one. Alone, or among
// instances that already moved, it waits for nothing.
func (v *leaseView) settling(now time.Time) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.started.IsZero() {
		v.started = now
	}
	until := v.started.Add(v.period / 2)
	if now.Before(until) {
		for id, s := range v.workers {
			if id != v.me && !s.moved {
				return until, true
			}
		}
	}
	if v.settled.IsZero() {
		v.settled = now
	}
	return time.Time{}, false
}

// overdue reports whether a free or expired lease has been so for half a
// lease period since this instance took part in the balance: the
// instance the plan gave it to (planFree) has not taken it, and anyone
// with room may.
func (v *leaseView) overdue(it lease.Shard, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.settled.IsZero() {
		return false
	}
	from, ok := v.since[it.ShardID]
	if it.Owner != "" {
		from, ok = v.expiresAt(it.ShardID, it.Owner)
	}
	if !ok {
		return false
	}
	if v.settled.After(from) {
		from = v.settled
	}
	return now.Sub(from) >= v.period/2
}

// dead reports whether an instance is known dead: its worker item was
// seen and did not move for a lease period. An instance not seen yet is
// not known dead (its ask is fresher than this instance's last scan).
func (v *leaseView) dead(id string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.workers[id]
	return ok && id != v.me && now.Sub(s.at) >= v.period
}

// deadWorkers returns the worker items of instances known dead, as seen:
// anyone may remove them while their counter stays as seen.
func (v *leaseView) deadWorkers(now time.Time) []lease.Worker {
	v.mu.Lock()
	defer v.mu.Unlock()
	var dead []lease.Worker
	for id, s := range v.workers {
		if id != v.me && now.Sub(s.at) >= v.period {
			dead = append(dead, lease.Worker{ID: id, Counter: s.counter})
		}
	}
	return dead
}

// forget drops a worker removed from the table.
func (v *leaseView) forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.workers, id)
}

// nextCycle is how long until the next lease cycle: a third of a lease
// period, or sooner when a lease of another instance would expire before
// then, so that a dead instance's leases are taken as soon as they expire.
func (v *leaseView) nextCycle(now time.Time) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	next := v.period / 3
	for id, it := range v.items {
		if it.Owner == "" || it.Owner == v.me || it.Checkpoint.Ended {
			continue
		}
		at, _ := v.expiresAt(id, it.Owner)
		if d := at.Sub(now); d > 0 && d < next {
			next = d
		}
	}
	return max(next+5*time.Millisecond, 10*time.Millisecond)
}

// askedRecently reports whether this instance asked for a shard's lease
// within the last lease period.
func (v *leaseView) askedRecently(shardID string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	a, ok := v.asked[shardID]
	return ok && now.Sub(a.at) < v.period
}

// askedWhy is why this instance asked for a shard's lease: "count" or
// "load" ("count" when it does not remember an ask).
func (v *leaseView) askedWhy(shardID string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if a, ok := v.asked[shardID]; ok {
		return a.why
	}
	return "count"
}

// setAsked records an ask and why it was made, and forgets those older
// than a lease period.
func (v *leaseView) setAsked(shardID string, at time.Time, why string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, a := range v.asked {
		if at.Sub(a.at) >= v.period {
			delete(v.asked, id)
		}
	}
	v.asked[shardID] = askMade{at: at, why: why}
}
