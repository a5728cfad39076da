package leasecoord

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// leaseWriters bounds the lease writes a commit makes at once.
const leaseWriters = 16

// Options are the settings of checkpoint.dynamodb the coordination needs.
type Options struct {
	// InstanceID names this instance in the table; two running instances
	// never share one.
	InstanceID string
	// LeasePeriod is how long a lease lasts without a renewal.
	LeasePeriod time.Duration
	// StealLimit is how many leases an instance asks live holders for per
	// cycle.
	StealLimit int
	// ByLoad balances by the measured load of the shards (falling back to
	// the count where loads are unknown or negligible) rather than by count.
	ByLoad bool
	// Group is the group of pipelines the instance belongs to (the table
	// given to New is its part of the table, lease.Grouped), for messages.
	Group string
	// TableFlags point the checkpoint command at the table (its name,
	// group, endpoint, region and credentials), for the fixes messages
	// name.
	TableFlags string
	// Config is a digest of each part of the pipeline's config, published
	// with every heartbeat and compared with the other instances' (see
	// configs.go); nil: unknown, nothing is compared.
	Config map[string]string
	// Clock is the time the coordinators live by; nil: the wall clock.
	Clock Clock
}

// leaseCoordination is the lease table shared by the input's streams.
type leaseCoordination struct {
	table lease.Store
	conf  Options
	clock Clock
	// nonce tells this process's worker items and leases apart from those
	// of another process started with the same instance_id.
	nonce string
	// readsPerScan is the coordinators' (see the constant); the simulation
	// lowers it, so that its few shards are read alone too.
	readsPerScan int
}

// New returns the coordination of instances sharing streams through the
// lease table t.
func New(t lease.Store, o Options) coord.Coordination { return newLeaseCoordination(t, o) }

func newLeaseCoordination(t lease.Store, o Options) *leaseCoordination {
	var b [8]byte
	rand.Read(b[:])
	return &leaseCoordination{table: t, conf: o, clock: cmp.Or[Clock](o.Clock, wallClock{}), nonce: hex.EncodeToString(b[:]), readsPerScan: readsPerScan}
}

func (c *leaseCoordination) Stream(st coord.Stream, pos *coord.Positions) coord.Coordinator {
	return c.stream(st, pos)
}

func (c *leaseCoordination) stream(st coord.Stream, pos *coord.Positions) *leaseCoordinator {
	return &leaseCoordinator{
		st: st, table: c.table, me: c.conf.InstanceID, nonce: c.nonce, group: c.conf.Group, config: c.conf.Config, tableFlags: cmp.Or(c.conf.TableFlags, checkpoint.TableFlags(c.table.Name(), c.conf.Group)),
		period: c.conf.LeasePeriod, steals: c.conf.StealLimit, byLoad: c.conf.ByLoad, pos: pos,
		clock: c.clock, saveMu: c.clock.NewMutex(),
		book: newLeaseBook(c.conf.LeasePeriod), view: newLeaseView(c.conf.InstanceID, c.nonce, c.conf.LeasePeriod),
		unstored: map[string][]string{}, broken: newBrokenItems(), endSeen: map[string]time.Time{},
		pres: presence{beat: lease.Beat{Bucket: -1}}, profiles: newProfiles(), readsPerScan: c.readsPerScan,
	}
}

// ClaimRegistration: instances on one lease table register a consumer
// once, the one that claims the registration in the table.
func (c *leaseCoordination) ClaimRegistration(streamARN, consumer string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		return c.table.ClaimRegistration(ctx, streamARN, consumer, c.conf.InstanceID)
	}
}

func (c *leaseCoordination) DropRegistration(ctx context.Context, streamARN, consumer string) error {
	return c.table.DropRegistration(ctx, streamARN, consumer)
}

// CommitEvery ticks at least every sixth of a lease period, so that each
// lease is written at least every half period.
func (c *leaseCoordination) CommitEvery(commitPeriod time.Duration) time.Duration {
	return min(commitPeriod, c.conf.LeasePeriod/6)
}

// Bound bounds a step of Close by a lease period: unreleased leases expire
// a lease period later anyway.
func (c *leaseCoordination) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return c.clock.WithTimeout(ctx, c.conf.LeasePeriod)
}

func (c *leaseCoordination) Close() error { return nil }

// leaseCoordinator is the coordinator of a stream shared through a lease
// table: one item per shard, leases taken, renewed, balanced and handed
// over by conditional writes (see lease), its held leases a state machine
// (leaseBook), what it saw of the others a view (leaseView).
type leaseCoordinator struct {
	st    coord.Stream
	table lease.Store
	me    string
	nonce string
	group string
	// tableFlags point the checkpoint command at the table.
	tableFlags string
	// config is the digest of this instance's pipeline config; configReport
	// the last mismatch reported (owned by the run loop).
	config       map[string]string
	configReport string
	period       time.Duration
	steals       int
	// byLoad balances by the shards' measured loads (balanceLoad).
	byLoad bool
	pos    *coord.Positions
	book   *leaseBook
	view   *leaseView
	clock  Clock

	// saveMu serializes the writes of held leases and of the worker item:
	// commits, the end of a shard, a handover, the release.
	saveMu sync.Locker
	// lastBeat is when the last successful heartbeat was sent, and beats
	// how many were sent (under saveMu).
	lastBeat time.Time
	beats    int64
	// pres is what this process beats as and published (under saveMu);
	// profiles what the others published, as their beats name it.
	pres     presence
	profiles *profiles
	// impostor is set once another process took over this instance's
	// name: this one reads nothing more.
	impostor atomic.Bool
	// beatSoon makes the next commit beat whatever the cadence: this
	// instance asked for a lease, and its holder waits for a sign of life.
	beatSoon atomic.Bool

	// Owned by the stream's run loop (load, pin, reset, cycle):
	// unstored holds the shards pinned and not yet in the table, with
	// their parents; gone the finished shards no longer listed whose
	// items are to be deleted; pinWait is until when another instance
	// that wrote the stream's item first is waited for to pin its first
	// shards.
	unstored map[string][]string
	gone     []string
	pinWait  time.Time
	created  time.Time
	// pinDue is set from a Reset until a pin succeeds, and while the last
	// pin failed: the stream starts no reader then (see read.Stream's
	// schedule), so a cycle takes and adopts no lease, which would stay
	// unread; the other instances read the shards meanwhile.
	pinDue bool
	// broken is what is known of the stream's malformed items.
	broken *brokenItems
	// listed is the last listing of the stream's shards (see Prune), taken
	// at listedAt; endSeen holds when each item was first seen ended. An
	// end is held against a listing taken after it only: an earlier one
	// may show the shard open still.
	listed   map[string]coord.Shard
	listedAt time.Time
	endSeen  map[string]time.Time
	// scanned is the last scan of the stream's items, made at scannedAt
	// when the change counter was changes: cycles reuse it until the
	// counter moves (see items). legacySeen is when an instance of an
	// earlier version was last seen alive (see isLegacy).
	scanned      *lease.Scan
	scannedAt    time.Time
	changes      int64
	readsPerScan int          // see readChanged
	legacySeen   atomic.Int64 // unix nanoseconds of c.clock; the commit loop reads it too
}

// load announces this instance, reads every item of the stream, and agrees
// with the other instances on where the first shards start (the stream's
// item, written by whichever instance came first). A stream deleted and
// created again since the item was written starts afresh, loudly.
func (c *leaseCoordinator) Load(ctx context.Context) (coord.FirstPin, error) {
	c.created = c.st.Created
	want := lease.Stream{ARN: c.st.ARN, Created: c.created, Start: c.st.StartFor(false)}
	item, created, err := c.table.PutStream(ctx, want)
	if err != nil {
		return coord.FirstPin{}, err
	}
	// After the stream's item, which counts the roster's items.
	if err := c.join(ctx); err != nil {
		return coord.FirstPin{}, err
	}
	if !created && !item.Pinned {
		// Another instance started first and is pinning the first shards:
		// read its items rather than race it for each (for a while: it may
		// have died meanwhile).
		c.pinWait = c.clock.Now().Add(c.period)
	}
	recreated := false
	if item.Malformed != "" {
		// Which stream the item described is not known: as if created
		// again, every shard whose start differs from its item's is
		// dropped, and the others keep their checkpoints.
		created := "its creation time unknown"
		if !c.created.IsZero() {
			created = "created at " + c.created.UTC().Format(time.RFC3339)
		}
		c.st.Log.Warnf("stream %s: the lease table %s's item of the stream cannot be read (%s): it is replaced by one of the stream as it is (%s). As for a stream created again, a shard keeps its checkpoint where it starts where its item says, and any other is dropped (each is said): %s",
			c.st.Name, c.table.Name(), item.Malformed, created, c.st.RestartsFrom)
		recreated = true
		item = lease.Stream{ARN: c.st.ARN, Created: c.created, Start: c.st.StartFor(true)}
		if err := c.table.ReplaceStream(ctx, item); err != nil {
			return coord.FirstPin{}, err
		}
	} else if !item.Created.IsZero() && !c.created.IsZero() && !item.Created.Equal(c.created) {
		c.st.Log.Warnf("stream %s was created at %v, but the lease table %s describes a stream of that name created at %v: the stream item is replaced. If the stream was deleted and created again, its shards start at other sequence numbers now: the checkpoint of each such shard is dropped (each is said) and %s; checkpoints of shards that start where they did are kept",
			c.st.Name, c.created.UTC(), c.table.Name(), item.Created.UTC(), c.st.RestartsFrom)
		recreated = true
		item = lease.Stream{ARN: c.st.ARN, Created: c.created, Start: c.st.StartFor(true)}
		if err := c.table.ReplaceStream(ctx, item); err != nil {
			return coord.FirstPin{}, err
		}
	}
	sc, err := c.table.Scan(ctx, c.st.ARN)
	if err != nil {
		return coord.FirstPin{}, err
	}
	c.reportBroken(sc, c.clock.Now())
	st := checkpoint.Stream{ARN: c.st.ARN, Created: c.created, Shards: map[string]checkpoint.Checkpoint{}}
	if !recreated {
		for _, it := range sc.Shards {
			st.Shards[it.ShardID] = it.Checkpoint
		}
	}
	c.pos.Replace(st)
	// The instances' liveness is their beats (the first cycle polls
	// them): the worker items of those that beat in the roster are what
	// they published, and their counters move only with that.
	now := c.clock.Now()
	c.noteLegacy(sc.Workers, now)
	sc.Workers = slices.DeleteFunc(sc.Workers, func(w lease.Worker) bool { return w.Roster })
	c.view.observe(sc, now)
	return coord.FirstPin{Due: !item.Pinned, Start: item.Start}, nil
}

// join writes this instance's worker item and beat for this process. An
// instance of this name beating with another process (another nonce) is
// watched for a lease period first: a live process beats at least every
// third of one, so if it moves, another process runs with this
// instance_id, and this one refuses to start. One that did not move for a
// lease period has no lease its heartbeat renews; the leases of its name
// are that process's, not this one's (see leaseView.mine): they are taken
// once expired by the usual rules, like any other instance's.
func (c *leaseCoordinator) join(ctx context.Context) error {
	p, err := c.table.Poll(ctx, c.st.ARN)
	if err != nil {
		return err
	}
	type sign struct {
		nonce, born string
		counter     int64
		value       string // the roster entry (lease.Beat.Replacing)
	}
	read := func() (sign, bool, error) {
		w, ok, err := c.table.GetWorker(ctx, c.st.ARN, c.me)
		if err != nil || !ok || w.Roster {
			return sign{}, false, err
		}
		return sign{w.Nonce, w.Born, w.Counter, ""}, true, nil // a process of an earlier version
	}
	for _, b := range p.Beats {
		if b.ID == c.me {
			c.pres.beat.Bucket = b.Bucket
			read = func() (sign, bool, error) {
				b, ok, err := c.table.GetBeat(ctx, c.st.ARN, b.Bucket, c.me)
				if !ok {
					return sign{}, false, err
				}
				return sign{b.Nonce, b.Born, b.Counter, b.Value()}, true, err
			}
		}
	}
	was, ok, err := read()
	if err != nil {
		return err
	}
	if ok && was.nonce != c.nonce {
		watch := c.period + c.period/12
		for deadline := c.clock.Now().Add(watch); c.clock.Now().Before(deadline); {
			if err := c.clock.Sleep(ctx, c.period/12); err != nil {
				return err
			}
			now, ok, err := read()
			if err != nil {
				return err
			}
			if !ok {
				break // it left, or was removed as dead
			}
			if now != was {
				return fmt.Errorf("stream %s: instance_id %q is in use by another running process (its presence in the lease table %s moved within %v): give every instance its own checkpoint.dynamodb.instance_id, or leave it empty for a generated one",
					c.st.Name, c.me, c.table.Name(), watch)
			}
		}
	}
	// The beat that takes the name over replaces the earlier process's
	// entry only while it is as last read: that read may have been
	// answered late, after the process beat again (sim seed 6793).
	c.pres.replacing = was.value
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	sent := c.clock.Now()
	_, err = c.beat(ctx, []string{}, nil, true)
	c.beats++ // sent: it may have been applied, whatever the answer
	if err != nil {
		return err
	}
	c.lastBeat = sent
	return nil
}

// pin creates the items of shards without a checkpoint, starting at
// start. The first pin of a stream whose item another instance wrote first
// waits (a lease period at most) for that instance's items instead.
func (c *leaseCoordinator) Pin(ctx context.Context, shards []coord.Shard, start checkpoint.Start, first bool) (err error) {
	defer func() { c.pinDue = err != nil }()
	if first && c.clock.Now().Before(c.pinWait) {
		pinned, err := c.awaitFirstPin(ctx, shards)
		if err != nil {
			return err
		}
		if pinned {
			first, start = false, checkpoint.Start{Kind: shard.TrimHorizon.String()}
		}
	}
	for _, sh := range c.pos.Pin(shards, start) {
		c.unstored[sh.ID] = sh.Parents
	}
	if err := c.storePinned(ctx); err != nil {
		return err
	}
	if first {
		return c.table.ReplaceStream(ctx, lease.Stream{ARN: c.st.ARN, Created: c.created, Start: start, Pinned: true})
	}
	return nil
}

// awaitFirstPin waits for the instance that pins the stream's first shards
// and takes its items; it reports whether it did (false: the wait is over
// and this instance pins them).
func (c *leaseCoordinator) awaitFirstPin(ctx context.Context, listed []coord.Shard) (bool, error) {
	starts := map[string]string{}
	for _, sh := range listed {
		starts[sh.ID] = sh.StartSeq
	}
	for {
		sc, err := c.table.Scan(ctx, c.st.ARN)
		if err != nil {
			return false, err
		}
		if sc.Stream != nil && sc.Stream.Pinned {
			shards := map[string]checkpoint.Checkpoint{}
			for _, it := range sc.Shards {
				// Not an item of a shard that starts elsewhere now (of
				// the stream before it was created again): pinned anew.
				if s := starts[it.ShardID]; s == "" || it.Checkpoint.ShardStart == "" || s == it.Checkpoint.ShardStart {
					shards[it.ShardID] = it.Checkpoint
				}
			}
			c.pos.Adopt(shards)
			c.pinWait = time.Time{}
			return true, nil
		}
		if !c.clock.Now().Before(c.pinWait) {
			return false, nil
		}
		if err := c.clock.Sleep(ctx, min(200*time.Millisecond, c.period/10)); err != nil {
			return false, err
		}
	}
}

// storePinned creates the items of pinned shards, and deletes those of
// finished shards gone past the retention period. A shard pinned meanwhile
// by another instance keeps that instance's start; an item of a shard that
// started elsewhere (a stream deleted and created again) is replaced,
// continuing its counter. What fails is tried again at the next pin or
// cycle.
func (c *leaseCoordinator) storePinned(ctx context.Context) error {
	type result struct {
		id      string
		got     lease.Shard
		created bool
		err     error
	}
	var todo []lease.Shard
	for _, id := range slices.Sorted(maps.Keys(c.unstored)) {
		parents := c.unstored[id]
		if c.broken.scannedShard(id) {
			continue // its item is malformed: reported, not replaced
		}
		cp, _ := c.pos.Of(id)
		todo = append(todo, lease.Shard{Stream: c.st.ARN, ShardID: id, Checkpoint: cp, Parents: parents, Created: c.created})
	}
	results := make([]result, len(todo))
	c.parallel(len(todo), func(i int) {
		want := todo[i]
		got, created, err := c.table.Create(ctx, want)
		if err == nil && got.Checkpoint.ShardStart != "" && want.Checkpoint.ShardStart != "" && got.Checkpoint.ShardStart != want.Checkpoint.ShardStart {
			was := got.Checkpoint.ShardStart
			if got, err = want, c.table.Replace(ctx, want, was); err == nil {
				c.st.Log.Warnf("stream %s shard %s: its checkpoint in the lease table %s is of a shard that started at sequence number %s, and the shard starts at %s now (the stream was deleted and created again): the checkpoint is dropped",
					c.st.Name, want.ShardID, c.table.Name(), was, want.Checkpoint.ShardStart)
			}
		}
		results[i] = result{want.ShardID, got, created, err}
	})
	// The items created, announced together: a listing's hundreds of new
	// shards move the stream's item twice, not twice each.
	var created []string
	for _, r := range results {
		if r.created {
			created = append(created, r.id)
		}
	}
	if len(created) > 0 {
		c.table.Announce(ctx, c.st.ARN, created)
	}
	var errs []error
	for _, r := range results {
		if errors.Is(r.err, lease.ErrLaterStream) {
			// This instance's listing is behind: the stream was created
			// again since. The shard stays unpinned, so unread, until the
			// next listing finds the new stream and resets.
			c.st.Log.Infof("stream %s shard %s: the lease table holds it as a shard of the stream created again after this instance listed it (%v): not read until the next listing", c.st.Name, r.id, r.err)
			continue
		}
		if r.err != nil {
			if !c.broken.pinFailed(r.id, r.err) {
				errs = append(errs, r.err)
			}
			continue
		}
		c.broken.pinDone(r.id)
		delete(c.unstored, r.id)
		c.pos.Set(r.id, r.got.Checkpoint)
	}
	var left []string
	for _, id := range c.gone {
		if err := c.table.Delete(ctx, c.st.ARN, id); err != nil {
			errs = append(errs, err)
			left = append(left, id)
		}
	}
	c.gone = left
	return errors.Join(errs...)
}

// prune forgets the shards gone past the retention period: the items of
// finished ones are deleted at the next cycle (an unfinished one stays, in
// case the listing that lacks it is only behind; it is never taken
// unlisted).
func (c *leaseCoordinator) Prune(listed map[string]coord.Shard) []string {
	c.listed, c.listedAt = listed, c.clock.Now()
	unfinished, finished := c.pos.Prune(listed)
	for _, id := range append(unfinished, finished...) {
		delete(c.unstored, id)
	}
	c.gone = append(c.gone, finished...)
	return unfinished
}

// reset drops every held lease and stops its reader before anything of the
// new stream is read, forgets every checkpoint, and describes the new
// stream in the table; the pin that follows replaces the old items.
func (c *leaseCoordinator) Reset(ctx context.Context, created time.Time) error {
	for _, id := range c.book.dropAll(errLeaseDropped) {
		c.st.Log.Infof("stream %s shard %s: its lease is dropped: the shard belongs to the stream before it was created again", c.st.Name, id)
	}
	c.pos.Reset(created)
	c.created = created
	c.unstored = map[string][]string{}
	c.gone = nil
	c.pinWait = time.Time{} // whoever pins the new stream first, pins it
	c.pinDue = true
	return c.table.ReplaceStream(ctx, lease.Stream{ARN: c.st.ARN, Created: created, Start: c.st.StartFor(true)})
}

func (c *leaseCoordinator) Acquire(shardID string, stop context.CancelCauseFunc) (coord.Grant, bool) {
	if _, unstored := c.unstored[shardID]; unstored {
		return nil, false
	}
	g, ok := c.book.grant(c, shardID, stop, c.clock.Now())
	if !ok {
		return nil, false
	}
	return g, true
}

func (c *leaseCoordinator) Changed() <-chan struct{} { return c.book.wake }

// leaseGrant is a reader's grant under a held lease.
type leaseGrant struct {
	c    *leaseCoordinator
	h    *heldLease
	cp   checkpoint.Checkpoint
	stop context.CancelCauseFunc
	// settle ends the wait for what the reader handed out (Stopped), once
	// the book detached it; nil until it waits (under the book's lock).
	settle context.CancelFunc
}

// detach ends the reader's settle wait: what it acknowledges no longer
// counts. Must hold the book's lock.
func (g *leaseGrant) detach() {
	if g.settle != nil {
		g.settle()
	}
}

func (g *leaseGrant) Start() checkpoint.Checkpoint { return g.cp }

func (g *leaseGrant) Acked(pos checkpoint.Position) { g.c.book.ack(g, pos) }

func (g *leaseGrant) Until() time.Time { return g.c.book.until(g) }

func (g *leaseGrant) Read(bytes int, arrived time.Time) {
	// Unknown, or later than now by Kinesis's clock: as now.
	if now := g.c.clock.Now(); arrived.IsZero() || arrived.After(now) {
		arrived = now
	}
	g.h.meter.Add(bytes, arrived)
}

// errNotHeld: the end of a shard cannot be stored under a lease that is no
// longer held as the reader was given it.
var errNotHeld = errors.New("its lease is no longer held: the end is stored by whoever holds it next")

func (g *leaseGrant) Ended(ctx context.Context, last *checkpoint.Position) error {
	g.c.saveMu.Lock()
	defer g.c.saveMu.Unlock()
	w, ok := g.c.book.ending(g, last)
	if !ok {
		return errNotHeld
	}
	if err := g.c.writeAll(context.WithoutCancel(ctx), []leaseWrite{w}); err != nil {
		return err
	}
	if !g.c.book.released(w) {
		// The write did not land (its lease's counter was read back after
		// an earlier write without an answer, or the lease was lost): the
		// end is not stored.
		return errEndNotStored
	}
	return nil
}

// errEndNotStored: the write that stores a shard's end did not land.
var errEndNotStored = errors.New("its end was not stored: the write did not land, and is made again")

// stopped waits for what the reader handed out to settle, as long as it
// takes, unless the book detaches the reader first: its lease was lost or
// handed over (see leaseBook.handover: after a lease period of waiting,
// the next holder reads again what was not acknowledged, which is never a
// loss).
func (g *leaseGrant) Stopped(ctx context.Context, settled func(context.Context) error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !g.c.book.settling(g, cancel) {
		return // lost or dropped: nothing it acknowledges counts
	}
	_ = settled(sctx)
	// The handover write is built under saveMu, as every write of a held
	// lease is: built before a renewal of the same lease lands, it would
	// carry the counter before it, fail, and read as the lease lost while
	// this instance still owns it.
	g.c.saveMu.Lock()
	defer g.c.saveMu.Unlock()
	now := g.c.clock.Now()
	w, due := g.c.book.readerStopped(g, now, g.c.view.judge(now))
	if !due {
		return
	}
	if err := g.c.writeAll(ctx, []leaseWrite{w}); err != nil && ctx.Err() == nil {
		g.c.st.Log.Errorf("stream %s: %v", g.c.st.Name, err)
	}
}
