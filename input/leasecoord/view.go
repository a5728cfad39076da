package leasecoord

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// leaseView is what one instance has seen of the other instances on a
// stream's lease table, by its own clock: when each lease item and each
// worker item last changed, the processes known dead, and the asks it
// made. Expiry is judged here, never by comparing clocks across hosts. Its
// lock is a leaf of the lock order (see the package comment).
type leaseView struct {
	me     string
	nonce  string // this process's
	period time.Duration

	mu sync.Mutex
	// items is the last scan's shard items, by shard id; since is when
	// each one's owner, owner's process and counter were first seen as
	// they are now, and owned when its owner and owner's process were (a
	// lease that moved stays for a while: see dwell).
	items map[string]lease.Shard
	since map[string]time.Time
	owned map[string]time.Time
	// left holds, by shard id, the instance its lease last left: its owner
	// before the last change of owner seen (see loadBook.byLoad).
	left map[string]string
	// workers holds every worker item seen, by instance.
	workers map[string]workerSighting
	// dead holds the processes known dead, by instance and nonce: gone
	// from the table (removed as dead) and not seen to move for a lease
	// period (see vanished), or replaced by another process of their name. Their asks stay
	// void whatever the table shows later.
	dead map[string]map[string]time.Time
	// loads holds the loads each instance published with its last
	// heartbeat: bytes a second by shard, by instance; lastLoad each
	// shard's last load published by whoever held it, which a lease taken
	// starts its meter from.
	loads    map[string]map[string]float64
	lastLoad map[string]float64
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
	// asks holds the asks seen on this instance's leases, by shard, and
	// when each was first seen: one whose process is not known alive
	// within a lease period counts as dead.
	asks map[string]askSeen
	// proved holds, by instance and nonce, when a read of its worker item
	// alone found it moved since an ask of it was first seen.
	proved map[string]time.Time
	// handed holds the items of the leases this process handed over, as
	// its handover left them, until they change (see released).
	handed map[string]lease.Shard
	// removed holds, by instance and nonce, when this instance sent the
	// removal of its worker item as dead that succeeded (see outlived).
	removed map[string]time.Time
	// legacy is set while instances of a version that renewed leases by
	// their items' writes share the stream (see leaseCoordinator.legacy):
	// a lease's expiry then counts from any move of its item's counter,
	// not only from a change of owner or a take.
	legacy bool
	// vanished holds, by instance, the last sighting of a worker item gone
	// from the table (removed as dead by another instance, or deleted by
	// its process on leaving) less than a lease period after this instance
	// last saw it move: its process counts as dead once a lease period has
	// passed since then with the item still gone (see observe).
	vanished map[string]workerSighting
}

// askSeen is an ask seen on a lease this instance holds: by whom, when
// first, and the asker's worker counter as last read alone after that
// (base, when read).
type askSeen struct {
	by, nonce string
	at        time.Time
	base      int64
	read      bool
	readAt    time.Time // when base was read
}

// askMade is an ask this instance made: when, and why (the balance by
// count or by load).
type askMade struct {
	at  time.Time
	why string
}

// workerSighting is a worker item as seen: its process, its counter,
// since when, and whether it was ever seen to move. A worker seen for the
// first time (or a new process of its name) is not alive until its
// counter moves: a crashed instance's item never does. held and listed
// are the leases its last heartbeat renewed (lease.Worker).
type workerSighting struct {
	nonce   string
	counter int64
	born    string // lease.Worker.Born: with counter, which item was seen
	at      time.Time
	moved   bool
	held    map[string]bool
	listed  bool
	// roster is set for an instance that beats in the roster (its beats
	// renew every lease its process took, not handed over to it since),
	// and bucket is its roster item.
	roster bool
	bucket int
}

// sightingOf is a first sighting of w at now.
func sightingOf(w lease.Worker, now time.Time, moved bool) workerSighting {
	return workerSighting{nonce: w.Nonce, counter: w.Counter, born: w.Born, at: now, moved: moved,
		held: w.Held, listed: w.Listed, roster: w.Roster, bucket: w.Bucket}
}

// is reports whether w is the item seen, unmoved: the same counter of the
// same item (one removed and written again may repeat a counter).
func (s workerSighting) is(w lease.Worker) bool {
	return s.counter == w.Counter && s.born == w.Born
}

// renews reports whether the worker's last heartbeat renewed the lease of
// an item of its name: of its process, and taken by it (a lease handed
// over to it renews by its item alone until it takes it up, which clears
// HandedOver). The heartbeat of a version before the roster renewed the
// leases it listed (one that listed none, every lease of its name).
func (s workerSighting) renews(it lease.Shard) bool {
	if it.OwnerNonce != "" && s.nonce != "" && it.OwnerNonce != s.nonce {
		return false // held by another process of the name
	}
	if s.roster {
		return !it.HandedOver
	}
	return !s.listed || s.held[it.ShardID]
}

// deadKeep is how long a process known dead is remembered: longer than any
// ask of it can stay in an item unseen (the holder removes the ask at its
// next write).
const deadKeep = 100

func newLeaseView(me, nonce string, period time.Duration) *leaseView {
	return &leaseView{me: me, nonce: nonce, period: period, items: map[string]lease.Shard{}, since: map[string]time.Time{},
		owned: map[string]time.Time{}, left: map[string]string{}, workers: map[string]workerSighting{}, dead: map[string]map[string]time.Time{},
		lastLoad: map[string]float64{}, asked: map[string]askMade{}, asks: map[string]askSeen{}, proved: map[string]time.Time{},
		removed: map[string]time.Time{}, handed: map[string]lease.Shard{}, vanished: map[string]workerSighting{}}
}

// askerAt takes in the worker counter of the process that asked for a
// shard's lease, read alone at now: the first read after the ask notes it;
// a later one that finds it moved since the last proves the asker alive
// when that last read was made, and no later: the move landed after it,
// maybe long before now (reads made a lease period apart, when the scans
// that make them are rare, prove nothing fresh). (The move may be a
// heartbeat sent before the asker died and applied late: a handover to it
// then waits out the lease's expiry; one removed as dead meanwhile is
// known dead whatever was proved.) It reports whether this read proved it.
func (v *leaseView) askerAt(shardID, by, nonce string, counter int64, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	a, ok := v.asks[shardID]
	if !ok || a.by != by || a.nonce != nonce {
		return false
	}
	moved := a.read && counter != a.base
	since := a.readAt
	a.base, a.read, a.readAt = counter, true, now
	v.asks[shardID] = a
	if moved && since.After(v.proved[by+"/"+nonce]) {
		v.proved[by+"/"+nonce] = since
	}
	return moved
}

// askSeen returns when the ask on an item was first seen (now, if it is
// new), and forgets the asks of other items seen before a lease period.
func (v *leaseView) askSeen(it lease.Shard, now time.Time) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	a, ok := v.asks[it.ShardID]
	if !ok || a.by != it.HandoffTo || a.nonce != it.HandoffNonce {
		a = askSeen{by: it.HandoffTo, nonce: it.HandoffNonce, at: now}
		v.asks[it.ShardID] = a
	}
	for id, o := range v.asks {
		if id != it.ShardID && now.Sub(o.at) >= deadKeep*v.period {
			delete(v.asks, id)
		}
	}
	return a.at
}

// mine reports whether an item's lease is this process's (as the table
// says: the book says whether this process holds it).
func (v *leaseView) mine(it lease.Shard) bool {
	return it.Owner == v.me && it.OwnerNonce == v.nonce
}

// observe takes in a scan made at now.
func (v *leaseView) observe(sc lease.Scan, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	items := map[string]lease.Shard{}
	for _, it := range sc.Shards {
		items[it.ShardID] = it
		if it.HandoffTo == "" {
			delete(v.asks, it.ShardID) // see askGone
		}
		old, ok := v.items[it.ShardID]
		if !ok || !sameGrant(old, it, v.legacy) {
			v.since[it.ShardID] = now
		}
		if h, ok := v.handed[it.ShardID]; ok && !sameHolder(h, it) {
			delete(v.handed, it.ShardID) // taken up, or by someone else
		}
		if !ok || old.Owner != it.Owner || old.OwnerNonce != it.OwnerNonce {
			v.owned[it.ShardID] = now
		}
		if ok && old.Owner != "" && old.Owner != it.Owner {
			v.left[it.ShardID] = old.Owner
		}
	}
	for id := range v.since {
		if _, ok := items[id]; !ok {
			delete(v.since, id)
			delete(v.owned, id)
			delete(v.left, id)
			delete(v.handed, id)
			delete(v.lastLoad, id)
		}
	}
	v.items = items
	workers := map[string]workerSighting{}
	v.loads = make(map[string]map[string]float64, len(sc.Workers))
	for _, w := range sc.Workers {
		v.loads[w.ID] = w.Loads
		s, ok := v.workers[w.ID]
		switch {
		case ok && s.nonce != w.Nonce:
			v.died(w.ID, s.nonce, now) // another process of the name replaced it
			s = sightingOf(w, now, false)
		case !ok:
			s = sightingOf(w, now, false)
		case !s.is(w):
			s = sightingOf(w, now, true)
			delete(v.dead[w.ID], w.Nonce) // it came back
			delete(v.removed, w.ID+"/"+w.Nonce)
		}
		s.held, s.listed, s.roster, s.bucket = w.Held, w.Listed, w.Roster, w.Bucket
		workers[w.ID] = s
	}
	for id, s := range v.workers {
		if _, ok := workers[id]; !ok {
			if now.Sub(s.at) >= v.period {
				v.died(id, s.nonce, now) // removed as dead (by another instance)
			} else {
				v.vanished[id] = s
			}
		}
	}
	// A worker item gone from the table sooner than a lease period after
	// this instance last saw it move (another instance, whose scans saw it
	// unmoved earlier, removed it as dead) is not forgotten: its process is
	// dead once a lease period has passed since that sighting with the item
	// still gone, as if it had stayed in the table, unmoved. (Before, it was
	// dropped unjudged, and a lease this process had handed to it waited
	// out the lease period after the handover instead of expiring then:
	// unread for three lease periods, sim seed 41195.)
	for id, s := range v.vanished {
		w, back := workers[id]
		switch {
		case back && w.nonce != s.nonce:
			v.diedOnce(id, s.nonce, now) // another process of the name replaced it
		case back:
		case now.Sub(s.at) >= v.period:
			v.diedOnce(id, s.nonce, now)
		default:
			continue
		}
		delete(v.vanished, id)
	}
	v.workers = workers
	for id, it := range items {
		if l, ok := v.loads[it.Owner][id]; ok && it.Owner != "" {
			v.lastLoad[id] = l
		}
	}
	for id, nonces := range v.dead {
		for n, at := range nonces {
			if now.Sub(at) >= deadKeep*v.period {
				delete(nonces, n)
			}
		}
		if len(nonces) == 0 {
			delete(v.dead, id)
		}
	}
	for k, at := range v.removed {
		if now.Sub(at) >= deadKeep*v.period {
			delete(v.removed, k)
		}
	}
}

// sameGrant reports whether two items of a shard show one grant of its
// lease: the same owner and process, and no take or handover between them.
// A holder's own writes (checkpoints) move the counter and grant nothing:
// leases are renewed by heartbeats alone (a take clears LastWrite and
// sets TakenAt, so that a lease taken back by its holder's process after
// another took it is another grant, however many checkpoints followed: sim
// seed 14014, where an instance that woke from a pause found the lease
// with its old owner and took it as expired; a handover sets HandedOver).
// With instances of a version that renewed by
// its writes about (legacy), any move of the counter counts.
func sameGrant(a, b lease.Shard, legacy bool) bool {
	if a.Owner != b.Owner || a.OwnerNonce != b.OwnerNonce || a.TakenAt != b.TakenAt {
		return false
	}
	if a.Counter == b.Counter {
		return true
	}
	return !legacy && b.Counter > a.Counter && b.LastWrite != "" && a.HandedOver == b.HandedOver
}

// setLegacy says whether instances of an earlier version share the stream
// (see legacy).
func (v *leaseView) setLegacy(on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.legacy = on
}

// died records the process nonce of instance id dead. Must hold v.mu.
func (v *leaseView) died(id, nonce string, now time.Time) {
	if v.dead[id] == nil {
		v.dead[id] = map[string]time.Time{}
	}
	v.dead[id][nonce] = now
}

// diedOnce records the process nonce of instance id dead, unless it is
// known dead already (since then). Must hold v.mu.
func (v *leaseView) diedOnce(id, nonce string, now time.Time) {
	if _, dead := v.dead[id][nonce]; !dead {
		v.died(id, nonce, now)
	}
}

// sawWorker takes in a worker item read alone at now (to confirm an expiry
// before a take): it moved, or not, as a scan would have shown it.
func (v *leaseView) sawWorker(w lease.Worker, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.workers[w.ID]
	if !ok || s.nonce != w.Nonce || s.is(w) {
		return
	}
	v.workers[w.ID] = sightingOf(w, now, true)
}

// watchWorker records a worker item read alone that this instance had not
// seen (a sighting of another process of the name is replaced): as if it
// moved at now.
func (v *leaseView) watchWorker(w lease.Worker, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.workers[w.ID]; ok && s.nonce == w.Nonce {
		return
	}
	v.workers[w.ID] = sightingOf(w, now, true)
}

// lastSighting returns the worker item of an instance as last seen,
// there or gone since (vanished).
func (v *leaseView) lastSighting(id string) (workerSighting, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.workers[id]; ok {
		return s, true
	}
	s, ok := v.vanished[id]
	return s, ok
}

// sighting returns the worker item of an instance as last seen.
func (v *leaseView) sighting(id string) (workerSighting, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.workers[id]
	return s, ok
}

// load returns the load of a shard as its holder owner published it, and
// whether it did.
func (v *leaseView) load(shardID, owner string) (float64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	l, ok := v.loads[owner][shardID]
	return l, ok
}

// seedLoad returns the load of a shard as its last holder published it,
// for the meter of a lease just taken.
func (v *leaseView) seedLoad(shardID string) (float64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	l, ok := v.lastLoad[shardID]
	return l, ok
}

// expired reports whether the lease of an item counts as expired: held by
// another process (of another instance, or an earlier one of this
// instance's name), and for a lease period by this instance's clock
// neither its item (owner, process and counter) nor, if it listed the
// lease, its owner's worker item moved. The holder reads a shard only
// within a lease period of the later of its last write of the item and its
// last heartbeat that listed it and was answered in time, each sent before
// this instance could see it.
func (v *leaseView) expired(it lease.Shard, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if it.Owner == "" || v.mine(it) {
		return false
	}
	at, ok := v.expiresAt(it)
	return ok && !now.Before(at)
}

// expiresAt is when the lease of an item expires, as things stand: a
// lease period after the later of its item's last change and its owner's
// worker item's last move, if that renewed it (workerSighting.renews), as
// this instance saw them. Must hold v.mu.
func (v *leaseView) expiresAt(it lease.Shard) (time.Time, bool) {
	at, ok := v.since[it.ShardID]
	if !ok {
		return time.Time{}, false
	}
	// A worker item not in the scan (its owner left, or was removed as
	// dead) renews nothing.
	if w, ok := v.workers[it.Owner]; ok && w.at.After(at) && w.renews(it) {
		at = w.at
	}
	at = at.Add(v.period)
	// A lease this process handed over grants nobody until its taker
	// takes it up (a take moves the counter): the wait is the asker's
	// time to. Once the asker's process is known dead, it is over.
	if h, ok := v.handed[it.ShardID]; ok && sameHolder(h, it) {
		if d, dead := v.dead[it.Owner][it.OwnerNonce]; dead && d.Before(at) {
			at = d
		}
	}
	return at, true
}

// sameHolder reports whether two items of a shard show its lease held
// alike: one owner, process and counter.
func sameHolder(a, b lease.Shard) bool {
	return a.Owner == b.Owner && a.OwnerNonce == b.OwnerNonce && a.Counter == b.Counter
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

// judge returns an askerJudge of the view as it is at now (a copy: the
// book calls it under its own lock). An asker is alive while its worker
// item moved within a lease period and since its ask was first seen (a
// proof of life after the ask: one that died right after asking is never
// handed anything, and its ask stops no reader); dead once it did not move
// for a lease period, once another process of its name replaced it, or
// once it is known dead (see leaseView.dead); not known either way until
// then, for at most a lease period after its ask was first seen.
func (v *leaseView) judge(now time.Time) askerJudge {
	v.mu.Lock()
	workers := make(map[string]workerSighting, len(v.workers))
	for id, s := range v.workers {
		workers[id] = s
	}
	dead := make(map[string]map[string]bool, len(v.dead))
	for id, nonces := range v.dead {
		dead[id] = make(map[string]bool, len(nonces))
		for n := range nonces {
			dead[id][n] = true
		}
	}
	proved := make(map[string]time.Time, len(v.proved))
	for k, at := range v.proved {
		if now.Sub(at) < v.period {
			proved[k] = at
		} else {
			delete(v.proved, k)
		}
	}
	me, period := v.me, v.period
	v.mu.Unlock()
	return func(id, nonce string, asked time.Time) askerVerdict {
		if id == me {
			return askerDead // an ask of another process of this name
		}
		verdict := askerUnknown
		s, seen := workers[id]
		same := seen && (nonce == "" || s.nonce == nonce) // its own item, as last seen
		// A sign of life counts since the ask, and for half a lease period:
		// the asker may have died since (a live one beats every third).
		fresh := func(at time.Time) bool { return at.After(asked) && now.Sub(at) < period/2 }
		// A proof is dated by the read it moved since, made after the ask
		// was seen (askerAt), at the same instant at the earliest.
		p, provedAt := proved[id+"/"+nonce]
		freshProof := provedAt && !p.Before(asked) && now.Sub(p) < period/2
		switch {
		case dead[id][nonce]:
			verdict = askerDead // removed as dead, or replaced by another process of its name: whatever it did before
		case freshProof:
			verdict = askerAlive // its item, read alone, moved since the ask
		case same && now.Sub(s.at) >= period:
			verdict = askerDead
		case same && s.moved && fresh(s.at):
			verdict = askerAlive
		}
		// No sign of life for a lease period since the ask (or since the
		// last one after it): dead.
		last := asked
		if p := proved[id+"/"+nonce]; p.After(last) {
			last = p
		}
		if same && s.moved && s.at.After(last) {
			last = s.at
		}
		if verdict == askerUnknown && now.Sub(last) >= period {
			verdict = askerDead
		}
		return verdict
	}
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
	at, ok := v.overdueAt(it)
	return ok && !now.Before(at)
}

// overdueAt is when a lease, free or once expired, is overdue (see
// overdue). Must hold v.mu.
func (v *leaseView) overdueAt(it lease.Shard) (time.Time, bool) {
	if v.settled.IsZero() {
		return time.Time{}, false
	}
	from, ok := v.since[it.ShardID]
	if it.Owner != "" {
		from, ok = v.expiresAt(it)
	}
	if !ok {
		return time.Time{}, false
	}
	if v.settled.After(from) {
		from = v.settled
	}
	return from.Add(v.period / 2), true
}

// dwelling reports whether a lease changed hands within dwell of now, as
// this instance saw it: such a lease is not moved again by load.
func (v *leaseView) dwelling(shardID string, dwell time.Duration, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	at, ok := v.owned[shardID]
	return ok && now.Sub(at) < dwell
}

// leftBy returns the instance a lease last left, as this instance saw it
// change hands ("" when it saw none).
func (v *leaseView) leftBy(shardID string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.left[shardID]
}

// deadWorkers returns the worker items of instances known dead, as seen:
// anyone may remove them while their counter stays as seen.
func (v *leaseView) deadWorkers(now time.Time) []lease.Worker {
	v.mu.Lock()
	defer v.mu.Unlock()
	var dead []lease.Worker
	for id, s := range v.workers {
		if id != v.me && now.Sub(s.at) >= v.period {
			dead = append(dead, lease.Worker{ID: id, Counter: s.counter, Nonce: s.nonce, Born: s.born, Roster: s.roster, Bucket: s.bucket})
		}
	}
	sortWorkers(dead)
	return dead
}

// released takes in an item as this process's release of its lease left
// it, answered at now (handed over, or freed): changed then, whatever the
// next scan shows. The giver's scans may fail for a while after: a lease
// handed to an asker that died before taking it up expires a lease period
// after the handover, not after the giver's next good scan, and once the
// asker is known dead if that comes first (see expiresAt). No one's grant
// starts at this write (one who takes the lease up bumps its counter,
// which a later scan shows as a change), so it fences nothing.
func (v *leaseView) released(it lease.Shard, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.asks, it.ShardID)
	old, ok := v.items[it.ShardID]
	if !ok {
		return // not scanned yet (or no longer there): the next scan tells
	}
	if old.Owner != "" && old.Owner != it.Owner {
		v.left[it.ShardID] = old.Owner
	}
	v.items[it.ShardID] = it
	v.since[it.ShardID], v.owned[it.ShardID] = now, now
	if it.Owner != "" {
		v.handed[it.ShardID] = it
	}
}

// askGone forgets the ask seen on a lease whose item, as this process
// wrote, took or scanned it, carries none: a later ask, even by the same
// process, is another, first seen when seen, and the asker's item read
// alone before it proves nothing of it.
func (v *leaseView) askGone(shardID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.asks, shardID)
}

// forget drops a worker removed from the table as dead: its process stays
// dead.
func (v *leaseView) forget(w lease.Worker, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.workers[w.ID]; ok && s.nonce == w.Nonce {
		delete(v.workers, w.ID)
	}
	v.died(w.ID, w.Nonce, now)
}

// removedAt records that a removal of w's item as dead, sent at sent,
// deleted it: the very item seen, unmoved (see outlived). A removal that
// found the item moved, written anew or gone records nothing.
func (v *leaseView) removedAt(w lease.Worker, sent time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w.Nonce != "" {
		v.removed[w.ID+"/"+w.Nonce] = sent
	}
}

// outlived reports whether the lease of an item, held by another process,
// can no longer be renewed by that process's heartbeat: this instance
// removed its worker item as dead by a removal sent no earlier than the
// lease's expiry as things stand. The removal was conditional on the
// counter seen unmoved, so every heartbeat of the process applied since
// wrote its item anew after the removal, and was answered after the lease
// had lapsed for its holder, which a heartbeat never revives
// (leaseBook.beaten); a write of the item itself moves its expiry. An
// expiry of such a lease needs no read of the owner's worker item to be
// confirmed (confirmExpired): that read would only say what the removal
// already settled, and while it fails (sim seed 87300: a reset, a throttled
// scan, a slow answer) the lease stays unread.
//
// So is a lease this process handed over to a process known dead, not
// taken up (its counter as the handover left it): its asker never held
// it, and only a write of the item itself (a take up, which moves the
// counter, as a take of it does) makes it anyone's; no heartbeat renews
// it. (Before, such a lease waited for a read of the asker's item after
// its death, and the asker, cut off from the table, had been handed the
// lease just after its last heartbeat: the shard was unread for three
// lease periods. Found by the simulation: seed 70069.)
func (v *leaseView) outlived(it lease.Shard) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if it.Owner == "" || it.OwnerNonce == "" || v.mine(it) {
		return false
	}
	if h, ok := v.handed[it.ShardID]; ok && sameHolder(h, it) {
		if _, dead := v.dead[it.Owner][it.OwnerNonce]; dead {
			return true
		}
	}
	sent, ok := v.removed[it.Owner+"/"+it.OwnerNonce]
	if !ok {
		return false
	}
	at, ok := v.expiresAt(it)
	return ok && !sent.Before(at)
}

// nextCycle is how long until the next lease cycle, the last one having
// started at started: a third of a lease period after that start, however
// long the cycle took (a change is seen within a cycle of its making, plus
// the reads of the cycle that sees it), though never sooner than a
// thirtieth of a lease period after its end (a table so slow that a cycle
// outlasts the third does not get cycles back to back); or sooner when a
// lease of another instance would expire, or a lease free or expired would
// be overdue, before then: a dead instance's leases are taken as soon as
// they expire, and one that the instance the plan gave it to did not take
// (a new instance waits before it trusts its view) as soon as it is
// overdue, not up to a third of a lease period later. (Sim seed 70069: a
// lease handed to an instance cut off from the table just after, whose
// reader had waited long to settle, was overdue 0.74 s before the next
// cycle took it, three lease periods after its shard was last read.)
func (v *leaseView) nextCycle(now, started time.Time) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	next := max(started.Add(v.period/3).Sub(now), v.period/30)
	soon := func(at time.Time) {
		// A moment that passed while the cycle ran brings the next at
		// once: the cycle judged before it (a dead instance's lease that
		// expired 20 ms after a cycle's judging waited a whole cycle
		// more: taken 16.4 s after the crash at a lease period of 10 s,
		// on a loaded CI machine). One before the cycle started, the
		// cycle saw.
		if !at.After(started) {
			return
		}
		if d := max(at.Sub(now), 0) + 5*time.Millisecond; d < next {
			next = d
		}
	}
	for _, it := range v.items {
		if v.mine(it) || it.Checkpoint.Ended {
			continue
		}
		if it.Owner != "" {
			at, _ := v.expiresAt(it)
			soon(at)
		}
		// Overdue, anyone with room takes it: the instance the plan gave
		// it to may be new and not trust its own view of it yet.
		if at, ok := v.overdueAt(it); ok {
			soon(at)
		}
	}
	return max(next, 10*time.Millisecond)
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
		if at.Sub(a.at) >= askPending*v.period {
			delete(v.asked, id)
		}
	}
	v.asked[shardID] = askMade{at: at, why: why}
}

// askPending is how long, in lease periods, an ask may be answered by a
// handover: the holder hands over once its reader settled, within a lease
// period of seeing the ask, which it may see a lease period late.
const askPending = 3

// pendingAsks returns the shards whose leases this instance asked for
// within askPending lease periods of now.
func (v *leaseView) pendingAsks(now time.Time) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for id, a := range v.asked {
		if now.Sub(a.at) < askPending*v.period {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func sortWorkers(ws []lease.Worker) {
	slices.SortFunc(ws, func(a, b lease.Worker) int { return cmp.Compare(a.ID, b.ID) })
}
