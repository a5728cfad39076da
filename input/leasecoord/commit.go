package leasecoord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// commit renews this instance's presence (the heartbeat, which renews
// every lease it holds), fences the leases renewed neither by it nor by a
// write for a lease period, and writes every held lease whose checkpoint
// moved, every fenced one and every one being handed over. A write whose
// lease was taken stops the shard's reader at once. A held lease whose
// checkpoint stays is not written: steady state costs a heartbeat per
// instance, not a write per lease.
func (c *leaseCoordinator) Commit(ctx context.Context) error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	if c.impostor.Load() {
		// Out for good: a heartbeat would write its presence again once
		// the process that took its name over left.
		return nil
	}
	start := c.clock.Now()
	c.fenced(c.book.fence(start))
	var errs []error
	if start.Sub(c.lastBeat) >= c.period/3 || c.beatSoon.Swap(false) {
		errs = append(errs, c.heartbeat(ctx))
	}
	now := c.clock.Now()
	// A handover due is made only to an asker alive now: one whose last
	// sign of life is no longer fresh is read alone once more.
	for _, a := range c.book.handoversDue(now) {
		if c.view.judge(now)(a.to, a.toNonce, a.asked) != askerAlive { // stale, or the scans fail
			c.proveAlive(ctx, a.shard, a.to, a.toNonce)
		}
	}
	now = c.clock.Now()
	ws := c.book.due(now, c.view.judge(now))
	errs = append(errs, c.writeAll(ctx, ws))
	if took := c.clock.Now().Sub(now); len(ws) > 0 && took > c.period/3 {
		c.st.Log.Warnf("stream %s: writing %d leases took %v, more than a third of lease_period (%v): leases may lapse and their shards stop; raise checkpoint.dynamodb.lease_period, or run more instances", c.st.Name, len(ws), took.Round(time.Millisecond), c.period)
	}
	c.st.Metrics.SinceRenewal.Set(c.book.oldestRenewal(c.clock.Now()).Milliseconds(), c.st.Name)
	if err := errors.Join(errs...); err != nil {
		c.st.Metrics.CommitFailures.Incr(1, c.st.Name)
		return fmt.Errorf("stream %s: lease table: %w", c.st.Name, err)
	}
	if len(ws) > 0 {
		c.st.Metrics.Commits.Incr(1, c.st.Name)
	}
	return nil
}

// heartbeat beats for this instance (saveMu held), publishing what
// changed (see beat), with the leases it holds listed: each that had not
// lapsed when the answer came is
// renewed from the moment it was sent (leaseBook.beaten). Another process
// that took over this instance's name stops this one (takenOver).
func (c *leaseCoordinator) heartbeat(ctx context.Context) error {
	hctx, cancel := c.clock.WithTimeout(ctx, c.period/3)
	defer cancel()
	sent := c.clock.Now()
	listed, loads := c.book.presence()
	anew, err := c.beat(hctx, listed, loads, false)
	c.beats++
	if errors.Is(err, lease.ErrDuplicateInstance) {
		c.takenOver(ctx)
		return err
	}
	if err == nil {
		c.lastBeat = sent
		c.fenced(c.book.beaten(sent, c.clock.Now(), listed, !anew))
	}
	return err
}

// proveAlive reads the worker item of the process that asked for a
// shard's lease, strongly consistent: the first read of an ask notes its
// counter, a later one that finds it moved proves the asker alive now
// (leaseView.askerAt). The asker beats soon after it asks, so the proof
// comes within a commit period or two rather than a lease cycle. It
// reports whether it proved it now.
func (c *leaseCoordinator) proveAlive(ctx context.Context, shardID, by, nonce string) bool {
	if nonce == "" {
		return false // an ask written without a nonce: the scans decide
	}
	rctx, cancel := c.clock.WithTimeout(ctx, c.period/3)
	defer cancel()
	w, found, err := c.readWorker(rctx, by)
	if err != nil || !found || w.Nonce != nonce {
		return false
	}
	return c.view.askerAt(shardID, by, nonce, w.Counter, c.clock.Now())
}

// takenOver stops this process for good (saveMu held): another process
// started with its instance_id and took over its presence. Every reader
// stops, and every lease is given up with its last checkpoint, by writes
// conditional on its counter as any: the others take them at once rather
// than once they expire (one taken meanwhile is no error).
func (c *leaseCoordinator) takenOver(ctx context.Context) {
	if c.impostor.Swap(true) {
		return
	}
	c.st.Log.Errorf("stream %s: another process started with instance_id %q and took over its presence in the lease table %s: this one stopped reading the stream and gives up its leases; give every instance its own checkpoint.dynamodb.instance_id (or leave it empty) and restart it", c.st.Name, c.me, c.table.Name())
	ws := c.book.releaseAll(errNameTaken)
	c.parallel(len(ws), func(i int) {
		wctx, cancel := c.clock.WithTimeout(ctx, c.period/3)
		defer cancel()
		_ = c.free(wctx, lease.Shard{ShardID: ws[i].shard(), Counter: ws[i].counter}, c.book.stamp(ws[i]).w)
	})
}

// fenced reports the leases just fenced: not renewed for a lease period.
func (c *leaseCoordinator) fenced(ids []string) {
	for _, id := range ids {
		c.st.Log.Warnf("stream %s shard %s: its lease could not be renewed for %v: stopped reading it until a renewal succeeds (what was handed out still counts when acknowledged)", c.st.Name, id, c.period)
	}
}

// writeAll makes writes of held leases, leaseWriters at a time (saveMu
// held), and then the handovers their answers made due.
func (c *leaseCoordinator) writeAll(ctx context.Context, ws []leaseWrite) error {
	var errs []error
	for len(ws) > 0 {
		var mu sync.Mutex
		var next []leaseWrite
		c.parallel(len(ws), func(i int) {
			then, err := c.write(ctx, ws[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if then != nil {
				next = append(next, *then)
			}
		})
		ws = next
	}
	c.st.Metrics.OwnedShards.Set(int64(c.book.count()), c.st.Name)
	return errors.Join(errs...)
}

// write makes one write of a held lease, bounded by a third of the lease
// period (one that hangs must not hold the renewal of the others past
// their lease period). It returns the handover write that an ask in its
// answer made due now.
func (c *leaseCoordinator) write(ctx context.Context, w leaseWrite) (*leaseWrite, error) {
	w = c.book.stamp(w)
	sent := c.clock.Now()
	wctx, cancel := c.clock.WithTimeout(ctx, c.period/3)
	it, err := c.table.Hold(wctx, c.st.ARN, w.shard(), c.me, w.counter, w.w)
	cancel()
	if err != nil {
		return nil, c.writeFailed(ctx, w, err)
	}
	c.book.wrote(w, it, sent)
	if w.w.Release {
		c.view.released(it, c.clock.Now())
		if w.cp.Ended {
			// The end is durable: the children may be read. Not in the
			// positions of a stream created again since it was sent.
			c.pos.SetIn(w.h.epoch, w.shard(), w.cp)
		}
		if w.givenUp {
			c.st.Log.Warnf("stream %s shard %s: gave its lease up at its last checkpoint: it was fenced %v ago, and no renewal since came back in time to read it again (the lease table answers too late); another instance reads the shard", c.st.Name, w.shard(), c.period)
		}
		if w.w.HandOver != "" {
			c.st.Metrics.LeasesHandedOver.Incr(1, c.st.Name)
			if w.unsettled {
				c.st.Log.Warnf("stream %s shard %s: handed its lease over to %s before every record handed out was acknowledged (none within %v): the next holder reads those again", c.st.Name, w.shard(), w.w.HandOver, c.period)
			} else {
				c.st.Log.Infof("stream %s shard %s: handed its lease over to %s after its last checkpoint", c.st.Name, w.shard(), w.w.HandOver)
			}
		}
		return nil, nil
	}
	return c.asked(ctx, it), nil
}

// asked handles an ask seen on a held lease's item, by what is known of
// the asking process (see leaseView.judge): one known dead has its ask
// removed by the next write; one seen alive since the ask was first seen
// is handed the lease once its reader settled, if it is still alive then;
// one not seen alive since (it may have died right after asking) leaves
// the lease as it is, read on, until it is known either way: every scan
// shows the ask again, and the asker's worker item is read alone each
// time (see proveAlive). It returns the handover write when that is due
// now.
func (c *leaseCoordinator) asked(ctx context.Context, it lease.Shard) *leaseWrite {
	if it.HandoffTo == "" {
		c.view.askGone(it.ShardID)
		return nil
	}
	now := c.clock.Now()
	seen := c.view.askSeen(it, now)
	verdict := c.view.judge(now)(it.HandoffTo, it.HandoffNonce, seen)
	if verdict == askerUnknown && c.proveAlive(ctx, it.ShardID, it.HandoffTo, it.HandoffNonce) {
		now = c.clock.Now()
		verdict = c.view.judge(now)(it.HandoffTo, it.HandoffNonce, seen)
	}
	judge := c.view.judge(now)
	switch verdict {
	case askerDead:
		c.book.clearAsk(it.ShardID)
		return nil
	case askerUnknown:
		return nil
	}
	if w, due := c.book.askedFor(it.ShardID, it.HandoffTo, it.HandoffNonce, seen, now, judge); due {
		return &w
	}
	return nil
}

// writeFailed handles a failed write of a held lease: a lease taken
// meanwhile is lost (its reader stops now); anything else is tried again
// by the next commit, the lease fencing itself once a lease period passes
// without a renewal.
//
// A write that failed without an answer (a time-out, a broken connection)
// may have been applied: the counter is then uncertain, and the next
// write's condition fails against this instance's own write. So a lease
// found not as written after such a failure is read back: still this
// instance's (only its own writes keep it the owner), it takes the counter
// it finds.
func (c *leaseCoordinator) writeFailed(ctx context.Context, w leaseWrite, err error) error {
	switch {
	case errors.Is(err, lease.ErrWithdrawn):
		c.book.withdrawn(w) // the taker is stopping: read on
		return nil
	case !errors.Is(err, lease.ErrLost):
		c.book.uncertain(w)
		c.st.Metrics.RenewalFailures.Incr(1, c.st.Name)
		return err
	}
	if c.book.isUncertain(w) {
		it, found, gerr := c.table.Get(ctx, c.st.ARN, w.shard())
		if gerr != nil {
			c.st.Metrics.RenewalFailures.Incr(1, c.st.Name)
			return gerr
		}
		if found && c.view.mine(it) {
			c.book.recount(w, it.Counter)
			return nil
		}
		if found && c.book.handedOverUnanswered(w, it) {
			// Its own handover, answered never: the asker has the lease
			// from the handover on (see leaseView.released).
			c.view.released(it, c.clock.Now())
			c.st.Metrics.LeasesHandedOver.Incr(1, c.st.Name)
			c.st.Log.Infof("stream %s shard %s: handed its lease over to %s (the answer was lost; read back)", c.st.Name, w.shard(), it.Owner)
			return nil
		}
	}
	if c.book.lose(w) {
		c.st.Metrics.LeasesLost.Incr(1, c.st.Name)
		c.st.Log.Warnf("stream %s shard %s: its lease was taken by another instance: stopped reading it; acknowledgements still to come no longer move its checkpoint", c.st.Name, w.shard())
	}
	return nil
}

// release writes the last checkpoint of every held lease and frees it,
// withdraws this instance's asks for leases of others, frees the leases
// handed to it and not taken up yet, and removes its presence: a clean
// stop, after which other instances take the shards and read on exactly
// after the last acknowledged record, and no lease is left in this
// instance's name. Everything runs leaseWriters at a time.
func (c *leaseCoordinator) Release(ctx context.Context) error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	ws := c.book.releaseAll(context.Canceled)
	// The release of a lease that failed is tried again below, with its
	// last checkpoint: freed at an older one, what was acknowledged since
	// would be read again.
	unreleased := map[string]lease.Write{}
	c.parallel(len(ws), func(i int) {
		if err := c.free(ctx, lease.Shard{ShardID: ws[i].shard(), Counter: ws[i].counter, Checkpoint: ws[i].cp}, c.book.stamp(ws[i]).w); err != nil {
			fail(err)
			mu.Lock()
			unreleased[ws[i].shard()] = ws[i].w
			mu.Unlock()
		}
	})
	// A handover to this instance either lands before its ask is withdrawn
	// (and is freed below) or fails (the holder keeps the lease).
	for pass := 0; pass < 2; pass++ {
		sc, err := c.table.ScanConsistent(ctx, c.st.ARN)
		if err != nil {
			fail(err)
			break
		}
		c.parallel(len(sc.Shards), func(i int) {
			it := sc.Shards[i]
			switch {
			case c.view.mine(it): // its release failed, or handed to this process and not taken up
				w := lease.Write{Release: true}
				mu.Lock()
				if u, ok := unreleased[it.ShardID]; ok {
					w = u
				}
				mu.Unlock()
				if err := c.free(ctx, it, w); err != nil {
					fail(err)
				}
			case pass == 0 && it.HandoffTo == c.me:
				if err := c.table.Withdraw(ctx, it, c.me); err != nil {
					fail(err)
				}
			}
		})
	}
	if !c.impostor.Load() {
		if b := c.pres.beat.Bucket; b >= 0 {
			if err := c.table.LeaveRoster(ctx, c.st.ARN, c.me, b); err != nil {
				fail(err)
			}
		}
		if err := c.table.Leave(ctx, c.st.ARN, c.me); err != nil {
			fail(err)
		}
	}
	return errors.Join(errs...)
}

// free frees a lease held at it.Counter with w. A counter moved by an
// earlier write of this instance that failed without an answer is read
// back; a lease someone else took is no error.
func (c *leaseCoordinator) free(ctx context.Context, it lease.Shard, w lease.Write) error {
	_, err := c.table.Hold(ctx, c.st.ARN, it.ShardID, c.me, it.Counter, w)
	if errors.Is(err, lease.ErrLost) {
		now, found, gerr := c.table.Get(ctx, c.st.ARN, it.ShardID)
		if gerr != nil {
			return gerr
		}
		if !found || !c.view.mine(now) {
			return nil
		}
		_, err = c.table.Hold(ctx, c.st.ARN, it.ShardID, c.me, now.Counter, w)
	}
	if errors.Is(err, lease.ErrLost) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s shard %s: releasing its lease: %w", c.st.Name, it.ShardID, err)
	}
	return nil
}

// parallel calls do for 0 to n-1, leaseWriters at a time, and returns
// once every call returned.
func (c *leaseCoordinator) parallel(n int, do func(i int)) {
	if n > 0 {
		c.clock.Parallel(n, leaseWriters, do)
	}
}
