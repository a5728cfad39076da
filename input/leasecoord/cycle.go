package leasecoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// cycle reads the stream's items and balances: it takes the leases handed
// to this instance and free or expired ones up to its share, asks live
// holders of more than their share for some, starts handing over the
// leases others asked it for, and removes the worker items of dead
// instances. Readers start at the next schedule. It returns when the next
// cycle is due: a third of a lease period after this one started, or
// sooner (see leaseView.nextCycle).
func (c *leaseCoordinator) Cycle(ctx context.Context, readable func(string) bool) time.Duration {
	started := c.clock.Now()
	if c.impostor.Load() {
		c.st.Log.Errorf("stream %s: not reading: another process runs with instance_id %q (see above)", c.st.Name, c.me)
		return c.period
	}
	if len(c.unstored) > 0 || len(c.gone) > 0 {
		if err := c.storePinned(ctx); err != nil && ctx.Err() == nil {
			c.st.Log.Errorf("stream %s: %v", c.st.Name, err)
		}
	}
	if c.pinDue {
		// No reader starts until a pin succeeds: a lease taken now would
		// stay unread (sim seed 28566: one taken right after a reset whose
		// pin kept losing its answers, unread for three lease periods).
		readable = func(string) bool { return false }
	}
	sc, err := c.look(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.st.Log.Errorf("stream %s: %v", c.st.Name, err)
			c.adoptAsked(ctx, readable)
		}
		return c.period / 3
	}
	if c.replaced(ctx, sc) {
		c.saveMu.Lock()
		c.takenOver(ctx)
		c.saveMu.Unlock()
		return c.period
	}
	now := c.clock.Now()
	c.view.observe(sc, now)
	c.checkConfigs(sc.Workers, c.view.live(now))
	ended := map[string]time.Time{}
	for _, it := range sc.Shards {
		if it.Checkpoint.Ended {
			seen, ok := c.endSeen[it.ShardID]
			if !ok {
				seen = now
			}
			if ended[it.ShardID] = seen; !c.listedAt.After(seen) {
				continue // ended after the listing was taken, maybe
			}
		}
		if err := coord.Contradicts(c.listed[it.ShardID], it.Checkpoint); err != nil {
			key := lease.GroupShardKey(c.group, it.Stream, it.ShardID)
			sc.Broken = append(sc.Broken, lease.BrokenItem{Key: key, ShardID: it.ShardID,
				Err: fmt.Errorf("lease table %q, item %s: %w", c.table.Name(), key, err)})
		}
	}
	c.endSeen = ended
	c.reportBroken(sc, now)

	var claims []claim
	var myLoad float64
	for _, l := range c.book.loads() {
		myLoad += l
	}
	c.st.Metrics.InstanceLoad.Set(int64(myLoad), c.st.Name)
	items := map[string]lease.Shard{}
	var adopt []lease.Shard
	var askedOf []lease.Shard
	dwell := c.dwell()
	for _, it := range sc.Shards {
		if c.book.scanned(it, c.me, c.nonce) {
			c.st.Metrics.LeasesLost.Incr(1, c.st.Name)
			c.st.Log.Warnf("stream %s shard %s: its lease was taken by another instance: stopped reading it", c.st.Name, it.ShardID)
		}
		held := c.book.holds(it.ShardID)
		if _, pinned := c.unstored[it.ShardID]; pinned || (!held && c.broken.shard(it.ShardID)) {
			continue
		}
		if !held {
			// The checkpoints and ends of shards this instance does not
			// hold: a parent finished elsewhere lets its children be read;
			// a lease taken starts at its item's checkpoint.
			c.pos.Learn(it.ShardID, it.Checkpoint)
		}
		if it.Checkpoint.Ended || !readable(it.ShardID) || !c.sameShard(it) {
			continue
		}
		items[it.ShardID] = it
		mine := c.view.mine(it)
		owner := it.Owner
		if owner == c.me && !mine {
			owner = earlierProcess(c.me) // another process of this name holds it: not this one
		}
		asked := it.HandoffTo
		if asked == "" && it.Owner != c.me && c.view.askedRecently(it.ShardID, now) {
			asked = c.me // asked, and the scan does not show it yet
		}
		cl := claim{shard: it.ShardID, owner: owner, expired: c.view.expired(it, now), asked: asked}
		cl.overdue = (it.Owner == "" || cl.expired) && c.view.overdue(it, now)
		cl.dwelling = c.view.dwelling(it.ShardID, dwell, now)
		cl.left = c.view.leftBy(it.ShardID)
		if it.Owner != "" {
			// Loads as published, this instance's own too: every instance
			// plans from the same figures. A lease its holder took since
			// its last heartbeat weighs what its last holder published,
			// which its meter started from.
			if cl.load, cl.measured = c.view.load(it.ShardID, it.Owner); !cl.measured {
				cl.load, cl.measured = c.view.seedLoad(it.ShardID)
			}
		}
		claims = append(claims, cl)
		switch {
		case mine && !held:
			adopt = append(adopt, it) // handed over to this process
		case mine && it.HandoffTo != "" && !c.book.behind(it):
			askedOf = append(askedOf, it)
		}
	}
	if len(askedOf) > 0 {
		c.handOver(ctx, askedOf)
	}

	for _, it := range adopt {
		c.adopt(ctx, it)
	}
	if until, wait := c.view.settling(now); wait {
		c.st.Log.Debugf("stream %s: waiting until %v for the instances seen for the first time to move before taking leases", c.st.Name, until.Format(time.RFC3339Nano))
		c.st.Metrics.OwnedShards.Set(int64(c.book.count()), c.st.Name)
		return min(c.view.nextCycle(c.clock.Now(), started), max(until.Sub(c.clock.Now()), 10*time.Millisecond))
	}
	decide, why := balance, "count"
	if c.byLoad {
		decide = balanceLoad
		if _, measured := leaseWeights(claims); measured {
			why = "load"
		}
	}
	take, ask := decide(c.me, claims, c.view.live(now), c.steals)
	take = c.confirmExpired(ctx, take, items)
	// Takes of distinct leases, leaseWriters at a time: one after another,
	// each waited for the answers of those before it (a crashed instance's
	// last lease was taken 140 ms after its first, against dynalite under
	// load, past the 1.5 lease periods of TestLeasesSIGKILLTakeover).
	c.parallel(len(take), func(i int) {
		cl := take[i]
		if c.take(ctx, items[cl.shard]) {
			c.st.Metrics.LeasesTaken.Incr(1, c.st.Name)
			cause := "free"
			if cl.expired {
				cause = "expired"
			}
			c.st.Metrics.LeaseMoves.Incr(1, c.st.Name, cause)
		}
	})
	for _, cl := range ask {
		if c.ask(ctx, items[cl.shard]) {
			c.beatSoon.Store(true) // the holder waits for a sign of life after the ask
			c.view.setAsked(cl.shard, now, why)
			c.st.Log.Debugf("stream %s shard %s: asked %s to hand its lease over (balance by %s)", c.st.Name, cl.shard, cl.owner, why)
		}
	}
	c.removeDead(ctx, now)
	c.st.Metrics.OwnedShards.Set(int64(c.book.count()), c.st.Name)
	return c.view.nextCycle(c.clock.Now(), started)
}

// look reads what a cycle needs: the roster each time (the instances'
// beats and the stream's change counter and log, a few small items), the
// items of the leases that changed owner since the last look, as the log
// names them (see readChanged), and all the stream's items instead when
// the log does not name them all or names many, at the first cycle, every
// safetyScans lease periods, and every cycle while instances of an earlier
// version share the stream (they announce nothing). The reads are
// strongly consistent, so that they show the change announced.
func (c *leaseCoordinator) look(ctx context.Context) (lease.Scan, error) {
	p, err := c.table.Poll(ctx, c.st.ARN)
	if err != nil {
		return lease.Scan{}, err
	}
	now := c.clock.Now()
	var stream lease.Stream
	if p.Stream != nil {
		stream = *p.Stream
	}
	full := c.scanned == nil || now.Sub(c.scannedAt) >= safetyScans*c.period || c.isLegacy(now)
	if !full && stream.Changes != c.changes {
		full = !c.readChanged(ctx, stream)
	}
	if full {
		sc, err := c.table.ScanConsistent(ctx, c.st.ARN)
		if err != nil {
			return lease.Scan{}, err
		}
		c.st.Metrics.LeaseScans.Incr(1, c.st.Name)
		c.noteLegacy(sc.Workers, now)
		c.scanned, c.scannedAt, c.changes = &sc, now, stream.Changes
	}
	c.view.setLegacy(c.isLegacy(now))
	sc := *c.scanned
	sc.Shards = slices.Clone(sc.Shards)
	sc.Broken = slices.Clone(sc.Broken)
	sc.Workers = c.workers(ctx, p)
	if c.isLegacy(now) {
		for _, w := range c.scanned.Workers {
			if !w.Roster {
				sc.Workers = append(sc.Workers, w)
			}
		}
	}
	return sc, nil
}

// readsPerScan is how many items read alone cost what a scan of the
// stream's items does, per item of the stream: a strongly consistent read
// of one (of up to 4 KB) costs a read unit, a scan one per 4 KB read, and
// an item of a stream is a few hundred bytes.
const readsPerScan = 16

// readChanged brings the last scan up to date with the changes the
// stream's item names since it (see lease.Stream.ChangedSince), reading
// each changed item alone. It reports false, reading nothing, when the log
// does not name every change, or names more than a scan would cost to
// read, and when a read fails (a scan then reads the stream, and reports
// an item that is malformed).
func (c *leaseCoordinator) readChanged(ctx context.Context, stream lease.Stream) bool {
	ids, ok := stream.ChangedSince(c.changes)
	if !ok || len(ids)*c.readsPerScan > len(c.scanned.Shards) {
		return false
	}
	type read struct {
		it    lease.Shard
		found bool
		err   error
	}
	reads := make([]read, len(ids))
	c.parallel(len(ids), func(i int) {
		r := &reads[i]
		r.it, r.found, r.err = c.table.Get(ctx, c.st.ARN, ids[i])
	})
	changed := make(map[string]read, len(ids))
	for i, id := range ids {
		if err := reads[i].err; err != nil {
			c.st.Log.Debugf("stream %s: reading the item of shard %s, changed: %v", c.st.Name, id, err)
			return false
		}
		changed[id] = reads[i]
	}
	// One pass over the last scan: each changed item as read now (gone if
	// not found), then those it did not have.
	shards := make([]lease.Shard, 0, len(c.scanned.Shards)+len(ids))
	for _, it := range c.scanned.Shards {
		r, ok := changed[it.ShardID]
		switch {
		case !ok:
			shards = append(shards, it)
		case r.found:
			shards = append(shards, r.it)
		}
		delete(changed, it.ShardID)
	}
	for _, id := range ids {
		if r, ok := changed[id]; ok && r.found {
			shards = append(shards, r.it)
		}
	}
	slices.SortFunc(shards, func(a, b lease.Shard) int { return strings.Compare(a.ShardID, b.ShardID) })
	sc := *c.scanned
	sc.Shards = shards
	c.scanned, c.changes = &sc, stream.Changes
	c.st.Metrics.LeaseChangesRead.Incr(int64(len(ids)), c.st.Name)
	return true
}

// adoptAsked takes up, while scans fail, the leases this process asked
// for and was handed: it reads their items alone. (A cycle takes up a
// lease handed over from its scan; with scans failing, throttled say, and
// the heartbeat going through, a lease handed over would wait out its
// expiry, unread, before another instance took it.)
func (c *leaseCoordinator) adoptAsked(ctx context.Context, readable func(string) bool) {
	for _, id := range c.view.pendingAsks(c.clock.Now()) {
		if c.book.holds(id) || !readable(id) {
			continue
		}
		it, found, err := c.table.Get(ctx, c.st.ARN, id)
		if err != nil || !found || !c.view.mine(it) || it.Checkpoint.Ended || !c.sameShard(it) {
			continue
		}
		c.pos.Learn(it.ShardID, it.Checkpoint)
		c.adopt(ctx, it)
	}
}

// adopt takes up a lease handed over to this process.
func (c *leaseCoordinator) adopt(ctx context.Context, it lease.Shard) {
	if c.take(ctx, it) {
		c.st.Metrics.LeasesStolen.Incr(1, c.st.Name)
		c.st.Metrics.LeaseMoves.Incr(1, c.st.Name, c.view.askedWhy(it.ShardID))
	}
}

// replaced reports whether the scan shows this instance's presence
// written by another process (one woken from a pause finds it so before
// its heartbeat fails): confirmed by a strongly consistent read, since an
// eventually consistent scan may show the presence of the process this
// one took the name over from.
func (c *leaseCoordinator) replaced(ctx context.Context, sc lease.Scan) bool {
	for _, w := range sc.Workers {
		if w.ID == c.me && w.Nonce != c.nonce {
			now, ok, err := c.readWorker(ctx, c.me)
			return err == nil && ok && now.Nonce != c.nonce
		}
	}
	return false
}

// earlierProcess names, in a plan, another process of instance me: the
// leases it holds count as another instance's, expiring by the usual rules.
func earlierProcess(me string) string { return me + " (another process)" }

// dwellPeriods is how long a lease that changed hands stays before it is
// moved again by load, in lease periods: a move pauses the shard for a
// handover, and one made on a meter's noise would be undone later.
const dwellPeriods = 5

func (c *leaseCoordinator) dwell() time.Duration { return dwellPeriods * c.period }

// confirmExpired reads, before the leases of others it is about to take
// as expired are taken, each such owner's worker item once, strongly
// consistent: a heartbeat that the scans did not show yet (eventually
// consistent, or sent just before this cycle) renews the leases it
// listed, which are then not taken. Free leases pass as they are, and so
// do those whose owner's process this instance removed as dead after they
// expired (leaseView.outlived): no heartbeat of it renews them.
func (c *leaseCoordinator) confirmExpired(ctx context.Context, take []claim, items map[string]lease.Shard) []claim {
	type read struct {
		w     lease.Worker
		moved bool // since this instance last saw it
		fresh bool // there, and not seen before: written again after its removal, say
		err   error
	}
	reads := map[string]read{}
	out := take[:0]
	for _, cl := range take {
		it := items[cl.shard]
		if !cl.expired || it.Owner == "" || c.view.outlived(it) {
			out = append(out, cl)
			continue
		}
		r, ok := reads[it.Owner]
		if !ok {
			seen, known := c.view.sighting(it.Owner)
			w, found, err := c.readWorker(ctx, it.Owner)
			r = read{w: w, err: err, moved: found && known && w.Nonce == seen.nonce && !seen.is(w),
				fresh: found && !known}
			switch {
			case r.moved:
				c.view.sawWorker(w, c.clock.Now())
			case r.fresh:
				// Its owner may live: an instance removed as dead that was
				// only cut off writes its item again at its next
				// heartbeat, and renews its leases by it. Watched from
				// now: its leases expire a lease period after it stops
				// moving, not before.
				c.view.watchWorker(w, c.clock.Now())
			}
			if err != nil && ctx.Err() == nil {
				c.st.Log.Debugf("stream %s: confirming that instance %s stopped: %v", c.st.Name, it.Owner, err)
			}
			reads[it.Owner] = r
		}
		switch {
		case r.err != nil: // not confirmed: the next cycle tries again
		case (r.moved || r.fresh) && (workerSighting{nonce: r.w.Nonce, held: r.w.Held, listed: r.w.Listed}).renews(it):
		default:
			out = append(out, cl)
		}
	}
	return out
}

// handOver starts handing over the held leases whose items carry an ask,
// and writes the handovers due now. The writes are built under saveMu, as
// every write of a held lease is, so that none carries a counter a
// concurrent renewal moved.
func (c *leaseCoordinator) handOver(ctx context.Context, items []lease.Shard) {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	var ws []leaseWrite
	for _, it := range items {
		if w := c.asked(ctx, it); w != nil {
			ws = append(ws, *w)
		}
	}
	if err := c.writeAll(ctx, ws); err != nil && ctx.Err() == nil {
		c.st.Log.Errorf("stream %s: %v", c.st.Name, err)
	}
}

// reportBroken takes in the malformed items of a scan (and those met when
// pinning): their shards are not taken, and each is reported at ERROR, with
// the command that sets it again, when first seen, when it changes and
// every few minutes while it stays.
func (c *leaseCoordinator) reportBroken(sc lease.Scan, now time.Time) {
	for _, it := range c.broken.scanned(sc, now) {
		if it.ShardID == "" {
			c.st.Log.Errorf("stream %s: %v: no shard of this input's can be told from it; delete it unless another program of yours wrote it", c.st.Name, it.Err)
			continue
		}
		c.st.Log.Errorf("stream %s shard %s: not read: %v: set the shard again with %s; it replaces the shard's item and deletes any second one",
			c.st.Name, it.ShardID, it.Err, checkpoint.SetCommand(c.tableFlags, c.st.StreamFlags(), it.ShardID, true))
	}
	c.st.Metrics.BrokenCheckpoints.Set(int64(c.broken.shards()), c.st.Name)
}

// sameShard reports whether an item is of the shard this instance knows
// under its id. One of a shard that starts elsewhere is of a stream deleted
// and created again, which this instance has not found yet (or of the one
// before, not replaced yet): it is neither taken nor read until discovery
// has sorted the stream out, or an instance that reads the old stream's
// shards would read a new one's and then, finding the recreate, drop its
// lease and let the records it handed out since its last checkpoint be read
// again.
func (c *leaseCoordinator) sameShard(it lease.Shard) bool {
	known, ok := c.pos.Of(it.ShardID)
	return ok && (known.ShardStart == "" || it.Checkpoint.ShardStart == "" || known.ShardStart == it.Checkpoint.ShardStart)
}

// take takes a lease as scanned; it reports whether it did. Another
// instance taking it first is contention, not an error; a take whose
// answer was lost is read back. One that failed, read back as not applied
// and the item as scanned (no one wrote it since), is sent once more at
// once, conditional on the same counter: it would be the same take a
// cycle later, and a cycle is a third of a lease period. (Before, takes
// refused and then slow, a cycle each, left a lease a dead process held
// unread for three lease periods: sim seeds 83704 and 65742.) The grant
// counts from the first sending, the earlier.
func (c *leaseCoordinator) take(ctx context.Context, it lease.Shard) bool {
	if c.book.holds(it.ShardID) {
		// A scan older than this instance's own take (eventually
		// consistent) shows the lease free: taking it again would restart
		// its reader from the stored checkpoint and hand out again what
		// the first reader handed out; and a lost answer read back would
		// find the first take (mine, counter one up) and count it as this
		// one (sim seed 66439).
		return false
	}
	sent := c.clock.Now()
	epoch := c.pos.Epoch()
	got, err := c.table.Take(ctx, it, c.me, c.nonce)
	for again := true; err != nil && !errors.Is(err, lease.ErrLost) && ctx.Err() == nil; again = false {
		now, found, gerr := c.table.Get(ctx, c.st.ARN, it.ShardID)
		if gerr == nil && found && c.view.mine(now) && now.Counter == it.Counter+1 {
			got, err = now, nil // applied; its answer was lost
			break
		}
		if !again || gerr != nil || !found || !sameHolder(now, it) {
			break
		}
		c.st.Log.Debugf("stream %s shard %s: taking its lease again at once: %v", c.st.Name, it.ShardID, err)
		got, err = c.table.Take(ctx, it, c.me, c.nonce)
	}
	if errors.Is(err, lease.ErrLost) && it.Owner != "" && it.Owner != c.me && !c.isLegacy(c.clock.Now()) && ctx.Err() == nil {
		// The holder wrote checkpoints since the scan: its writes renew
		// nothing, and its lease expired all the same. (Scans are made
		// only when an owner changes: a busy shard's counter has moved
		// since, and a take at the scanned counter fails.)
		// Its owner's beat is read once more, after the item: a holder
		// that woke from a pause revives a lapsed lease by a beat and
		// then a write of the item (leaseBook.wrote), and a take
		// conditional on the item as read here fails if that write came
		// first (sim seed 514). And the lease must still be expired by
		// this instance's view: a read of the owner's beat since (made
		// for another of its leases) may have found it moved, which the
		// read here, compared with that sighting, would not show (sim
		// seed 11363).
		if now, found, gerr := c.table.Get(ctx, c.st.ARN, it.ShardID); gerr == nil && found && now.Counter != it.Counter && sameGrant(it, now, false) &&
			c.view.expired(now, c.clock.Now()) &&
			len(c.confirmExpired(ctx, []claim{{shard: now.ShardID, owner: now.Owner, expired: true}}, map[string]lease.Shard{now.ShardID: now})) == 1 {
			got, err = c.table.Take(ctx, now, c.me, c.nonce)
		}
	}
	if errors.Is(err, lease.ErrLost) {
		c.st.Log.Debugf("stream %s shard %s: another instance took the lease first", c.st.Name, it.ShardID)
		return false
	}
	if err != nil {
		if ctx.Err() == nil {
			c.st.Log.Errorf("stream %s: %v", c.st.Name, err)
		}
		return false
	}
	from := "free"
	switch {
	case c.view.mine(it):
		from = "handed over"
	case it.Owner == c.me:
		from = "expired, of another process of this instance's name"
	case it.Owner != "":
		from = "expired, of " + it.Owner
	}
	c.st.Log.Debugf("stream %s shard %s: took its lease (%s) at %s", c.st.Name, it.ShardID, from, describeCheckpoint(got.Checkpoint))
	load, measured := c.view.seedLoad(it.ShardID)
	c.view.askGone(got.ShardID) // a take removes the ask
	c.book.took(got, sent, epoch, load, measured)
	c.pos.SetIn(epoch, got.ShardID, got.Checkpoint)
	return true
}

// ask asks the holder of a lease to hand it over; it reports whether the
// ask is in the item (an ask whose answer was lost is read back).
func (c *leaseCoordinator) ask(ctx context.Context, it lease.Shard) bool {
	err := c.table.Ask(ctx, it, c.me, c.nonce)
	if err != nil && !errors.Is(err, lease.ErrLost) && ctx.Err() == nil {
		if now, found, gerr := c.table.Get(ctx, c.st.ARN, it.ShardID); gerr == nil && found && now.HandoffTo == c.me && now.HandoffNonce == c.nonce {
			return true
		}
		c.st.Log.Errorf("stream %s: %v", c.st.Name, err)
	}
	return err == nil
}

// removeDead deletes the worker items of instances known dead,
// leaseWriters at a time, each only while its counter is as seen (an
// instance that came back keeps its own).
func (c *leaseCoordinator) removeDead(ctx context.Context, now time.Time) {
	dead := c.view.deadWorkers(now)
	c.parallel(len(dead), func(i int) {
		w := dead[i]
		sent := c.clock.Now()
		removed, err := c.removeWorker(ctx, w)
		if err != nil {
			if ctx.Err() == nil {
				c.st.Log.Warnf("stream %s: removing the presence of instance %s, dead for a lease period: %v", c.st.Name, w.ID, err)
			}
			return
		}
		c.view.forget(w, c.clock.Now())
		if !removed {
			return // it moved, was written anew, or someone else removed it
		}
		c.view.removedAt(w, sent)
		c.st.Log.Debugf("stream %s: removed the presence of instance %s: it did not move for a lease period", c.st.Name, w.ID)
	})
}

// removeWorker removes the presence of a dead instance while it is as seen:
// its beat, and then its worker item (what it published); an instance of
// an earlier version, its worker item.
func (c *leaseCoordinator) removeWorker(ctx context.Context, w lease.Worker) (bool, error) {
	if !w.Roster {
		return c.table.RemoveWorker(ctx, c.st.ARN, w)
	}
	removed, err := c.table.RemoveBeat(ctx, c.st.ARN, lease.Beat{ID: w.ID, Nonce: w.Nonce, Born: w.Born, Counter: w.Counter, Bucket: w.Bucket})
	if err != nil || !removed {
		return removed, err
	}
	c.profiles.mu.Lock()
	prof, ok := c.profiles.items[w.ID]
	c.profiles.mu.Unlock()
	if ok && prof.Nonce == w.Nonce {
		if _, err := c.table.RemoveWorker(ctx, c.st.ARN, prof); err != nil && ctx.Err() == nil {
			c.st.Log.Debugf("stream %s: removing what dead instance %s published: %v", c.st.Name, w.ID, err)
		}
	}
	return true, nil
}

func describeCheckpoint(cp checkpoint.Checkpoint) string {
	switch {
	case cp.Ended:
		return "its end"
	case cp.Position != nil:
		return "checkpoint " + cp.Position.String()
	}
	return fmt.Sprintf("its start (%s)", cp.Start.Kind)
}
