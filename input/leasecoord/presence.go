package leasecoord

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// How an instance shows it lives, and sees the others live, for a cost that
// does not grow with the shards: its heartbeat is a beat in the stream's
// roster (lease.Beat: one write unit), and what it publishes for the
// balance (the loads of its shards, its config digest) is its worker item,
// written again only when that changed enough to matter. Every cycle reads
// the roster and the stream's change counter (lease.Poll); the stream's
// items are scanned only when an owner changed (the counter moved), at the
// start, every safetyScan, and while instances of an earlier version,
// which beat by their worker items and renew leases by their items'
// writes, share the stream (legacy).

// safetyScans is how often, in lease periods, the stream's items are
// scanned when no change was announced: a change whose announcement was
// lost (its writer died between the write and the announcement) is seen
// that late at worst.
const safetyScans = 30

// legacyKeep is how long, in lease periods, an instance keeps beating by
// its worker item too, and scanning every cycle, after it last saw an
// instance of an earlier version alive.
const legacyKeep = 3

// publishEvery bounds how often, in the long run, the worker item is
// written again for loads that moved, in lease periods, and publishBurst
// how many such writings may follow each other at once (a token bucket):
// a shard that turns hot ramps up its meter over a few cycles, and the
// balance should see the ramp as it goes, not its first step and then
// nothing for publishEvery; loads that wander for good cost a writing
// every publishEvery. publishShift is the relative move of a shard's load
// (or of the instance's, for shards taken or given up) that makes it
// worth writing.
const (
	publishEvery = 2
	publishBurst = 3
	publishShift = 0.25
)

// presence is what this process published and beats as (under saveMu).
type presence struct {
	beat      lease.Beat // as last written; Bucket -1 before the first
	published map[string]float64
	held      []string // the leases held when it was published
	// tokens are the writings for moved loads allowed now (see
	// publishBurst), as of tokensAt.
	tokens   float64
	tokensAt time.Time
	// replacing is the entry of an earlier process of this name the
	// first beat replaces (lease.Beat.Replacing).
	replacing string
	due       bool  // the worker item is to be written at the next heartbeat
	tries     int64 // writings of the worker item sent (Presence.Profile)
}

// profiles caches the worker items of the other instances, as of the
// profile their beats name: read again only when that moved. Its lock is a
// leaf.
type profiles struct {
	mu    sync.Mutex
	items map[string]lease.Worker // by instance id
	// buckets holds each instance's roster item, as last polled, and
	// rosters how many roster items the stream had then.
	buckets map[string]int
	rosters int
}

func newProfiles() *profiles {
	return &profiles{items: map[string]lease.Worker{}, buckets: map[string]int{}}
}

// workers assembles what a poll shows of the instances: each beat, with
// what its process published (read again where its profile moved, side by
// side, leaseWriters at a time: a fleet rebalancing publishes many at
// once, and the cycle acts on its view only after them; kept as it was
// while that read fails).
func (c *leaseCoordinator) workers(ctx context.Context, p lease.Poll) []lease.Worker {
	var stale []string
	buckets := make(map[string]int, len(p.Beats))
	for _, b := range p.Beats {
		buckets[b.ID] = b.Bucket
		if c.profileStale(b) && !slices.Contains(stale, b.ID) {
			stale = append(stale, b.ID)
		}
	}
	c.parallel(len(stale), func(i int) { c.readProfile(ctx, stale[i]) })
	out := make([]lease.Worker, 0, len(p.Beats))
	for _, b := range p.Beats {
		out = append(out, c.withCachedProfile(b))
	}
	c.profiles.mu.Lock()
	c.profiles.buckets = buckets
	if p.Stream != nil {
		c.profiles.rosters = p.Stream.Rosters
	}
	for id := range c.profiles.items {
		if _, ok := buckets[id]; !ok {
			delete(c.profiles.items, id)
		}
	}
	c.profiles.mu.Unlock()
	return out
}

// profileStale reports whether what a beat's process published is to be
// read again: its profile or process moved since the worker item cached
// (this process's own: only when the beat is of another process).
func (c *leaseCoordinator) profileStale(b lease.Beat) bool {
	c.profiles.mu.Lock()
	prof, ok := c.profiles.items[b.ID]
	c.profiles.mu.Unlock()
	if b.ID == c.me {
		return b.Nonce != c.nonce
	}
	return !ok || prof.Nonce != b.Nonce || prof.Profile != b.Profile
}

// readProfile reads an instance's worker item into the cache (kept as it
// was when the read fails).
func (c *leaseCoordinator) readProfile(ctx context.Context, id string) {
	if w, found, err := c.table.GetWorker(ctx, c.st.ARN, id); err == nil && found {
		c.profiles.mu.Lock()
		c.profiles.items[id] = w
		c.profiles.mu.Unlock()
	}
}

// withProfile is the worker a beat shows: its liveness (counter, process,
// birth) with what its process last published.
func (c *leaseCoordinator) withProfile(ctx context.Context, b lease.Beat) lease.Worker {
	if c.profileStale(b) {
		c.readProfile(ctx, b.ID)
	}
	return c.withCachedProfile(b)
}

// withCachedProfile is withProfile from the cache alone.
func (c *leaseCoordinator) withCachedProfile(b lease.Beat) lease.Worker {
	c.profiles.mu.Lock()
	prof, ok := c.profiles.items[b.ID]
	c.profiles.mu.Unlock()
	w := lease.Worker{ID: b.ID, Counter: b.Counter, Nonce: b.Nonce, Born: b.Born, Roster: true, Bucket: b.Bucket}
	if ok && prof.Nonce == b.Nonce {
		w.Loads, w.Config = prof.Loads, prof.Config
	}
	return w
}

// readWorker reads the beat of an instance alone, strongly consistent,
// with what it published: a lease.Worker as a scan would show it. It looks
// in the roster item the instance was last polled or seen in first, and
// then in every other: an instance removed as dead since the last poll
// that beat again is in the roster anew (in its own item, or in the first
// with room for a new process), and such a beat renews its leases. An
// instance in no roster item may be of an earlier version: its worker
// item, read alone, is its beat.
func (c *leaseCoordinator) readWorker(ctx context.Context, id string) (lease.Worker, bool, error) {
	c.profiles.mu.Lock()
	bucket, polled := c.profiles.buckets[id]
	rosters := max(c.profiles.rosters, 1)
	c.profiles.mu.Unlock()
	var tries []int
	if polled {
		tries = append(tries, bucket)
	} else if s, seen := c.view.lastSighting(id); seen && s.roster {
		tries = append(tries, s.bucket)
	}
	for n := range rosters {
		if !slices.Contains(tries, n) {
			tries = append(tries, n)
		}
	}
	for _, n := range tries {
		b, found, err := c.table.GetBeat(ctx, c.st.ARN, n, id)
		if err != nil {
			return lease.Worker{}, false, err
		}
		if found {
			return c.withProfile(ctx, b), true, nil
		}
	}
	w, found, err := c.table.GetWorker(ctx, c.st.ARN, id)
	if err != nil || !found || w.Roster {
		return lease.Worker{}, false, err // in no roster item: gone (what it published stays until removed)
	}
	return w, true, nil
}

// beat renews this instance's presence (saveMu held): its worker item
// first when what it publishes changed enough (or, with instances of an
// earlier version about, every time, moving its counter as they expect),
// then its beat. ErrDuplicateInstance: another process beats under this
// instance's name. anew reports a beat written anew: this process's entry
// had been removed as dead (see leaseBook.beaten).
func (c *leaseCoordinator) beat(ctx context.Context, listed []string, loads map[string]float64, takeOver bool) (anew bool, err error) {
	now := c.clock.Now()
	if takeOver {
		// The roster entry first: it replaces an earlier process's
		// entry only while that process did not beat since it was read,
		// and the worker item, written whatever it holds, is written
		// only then.
		b := c.pres.beat
		b.Nonce, b.Counter, b.Replacing = c.nonce, c.beats, c.pres.replacing
		got, err := c.table.Beat(ctx, c.st.ARN, c.me, b, true)
		if err != nil {
			return false, err
		}
		c.pres.beat = got
	}
	legacy := c.isLegacy(now)
	if takeOver || legacy || c.pres.due || c.loadsMoved(listed, loads, now) {
		// What is published is for the balance: a failure to write it
		// does not hold the beat up, which renews the leases.
		err = c.table.Heartbeat(ctx, c.st.ARN, c.me, lease.Presence{Nonce: c.nonce, Loads: loads, Config: c.config, Held: listed,
			Beat: c.beats, Born: lease.NewWriteID(), Roster: true, Profile: c.pres.tries + 1}, takeOver)
		c.pres.tries++ // whatever the answer: a write whose answer was lost is another writing
		switch {
		case err == nil:
			c.pres.beat.Profile = c.pres.tries
			c.pres.published, c.pres.due = maps.Clone(loads), false
			c.pres.held = slices.Clone(listed)
			// This instance plans from what it published, as the others do.
			c.profiles.mu.Lock()
			c.profiles.items[c.me] = lease.Worker{ID: c.me, Nonce: c.nonce, Profile: c.pres.tries, Loads: maps.Clone(loads), Config: c.config, Roster: true}
			c.profiles.mu.Unlock()
		case takeOver || legacy || errors.Is(err, lease.ErrDuplicateInstance):
			return false, err // with instances of an earlier version about, it is the renewal they see
		default:
			c.pres.due = true
			c.st.Log.Debugf("stream %s: publishing this instance's loads: %v", c.st.Name, err)
		}
	}
	b := c.pres.beat
	b.Nonce = c.nonce
	b.Counter = c.beats
	got, err := c.table.Beat(ctx, c.st.ARN, c.me, b, takeOver)
	if err != nil {
		return false, err
	}
	anew = got.Born != c.pres.beat.Born && c.pres.beat.Born != ""
	if anew {
		c.pres.due = true // written anew after a removal: the worker item may be gone too
	}
	got.Profile = max(got.Profile, c.pres.beat.Profile)
	c.pres.beat = got
	return anew, nil
}

// loadsMoved reports whether what this instance holds, or the loads it
// measured, moved enough since they were last published to publish them
// again: other leases held (at once: every instance plans from what each
// holds), or a shard's load (or their sum) moved by publishShift, a shard
// whose meter was not warm yet counting as 0, while a token is left (see
// publishBurst; it takes one). An idle shard whose meter warms up moves
// nothing.
func (c *leaseCoordinator) loadsMoved(listed []string, loads map[string]float64, now time.Time) bool {
	if !slices.Equal(listed, c.pres.held) {
		return true
	}
	refill := publishEvery * c.period
	if c.pres.tokensAt.IsZero() {
		c.pres.tokens = publishBurst
	} else if d := now.Sub(c.pres.tokensAt); d > 0 {
		c.pres.tokens = min(publishBurst, c.pres.tokens+float64(d)/float64(refill))
	}
	c.pres.tokensAt = now
	if c.pres.tokens < 1 || !loadsShifted(listed, c.pres.published, loads) {
		return false
	}
	c.pres.tokens--
	return true
}

// loadsShifted reports whether a shard's load, or their sum, moved by
// publishShift from old to loads.
func loadsShifted(listed []string, old, loads map[string]float64) bool {
	var sumOld, sumNew float64
	for _, id := range listed {
		o, l := old[id], loads[id]
		sumOld, sumNew = sumOld+o, sumNew+l
		if shifted(o, l) {
			return true
		}
	}
	return shifted(sumOld, sumNew)
}

// shifted reports whether a load moved from a to b by publishShift of the
// larger, ignoring moves under a kilobyte a second.
func shifted(a, b float64) bool {
	d := math.Abs(a - b)
	return d >= 1024 && d >= publishShift*max(a, b)
}

// isLegacy reports whether an instance of an earlier version was seen
// alive within legacyKeep lease periods.
func (c *leaseCoordinator) isLegacy(now time.Time) bool {
	seen := c.legacySeen.Load()
	return seen != 0 && now.Sub(time.Unix(0, seen)) < legacyKeep*c.period
}

// noteLegacy takes in the worker items of a scan: one of an earlier
// version (no roster) that moved since the last scan is alive.
func (c *leaseCoordinator) noteLegacy(ws []lease.Worker, now time.Time) {
	for _, w := range ws {
		if w.Roster || w.ID == c.me {
			continue
		}
		if s, seen := c.view.sighting(w.ID); !seen || s.roster || s.counter != w.Counter || s.born != w.Born || now.Sub(s.at) < c.period {
			c.legacySeen.Store(now.UnixNano())
			return
		}
	}
}
