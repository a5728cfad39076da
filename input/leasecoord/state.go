package leasecoord

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/rate"
)

// Causes of a reader's stop, set on its context.
var (
	errLeaseLost    = errors.New("the shard's lease was taken by another instance")
	errLeaseExpired = errors.New("the shard's lease was not renewed within lease_period")
	errHandoff      = errors.New("the shard's lease is handed over to another instance")
	errLeaseDropped = errors.New("the stream was deleted and created again: its leases are dropped")
	errNameTaken    = errors.New("another process took over this instance's name: its leases are given up")
)

// leaseState is where a lease this instance holds stands. A lease enters
// the book held, when a take (or a handover to this instance) succeeded,
// and leaves it released or lost; nothing of it counts after that.
type leaseState int

const (
	// leaseHeld: renewed within the lease period, by its take or by this
	// instance's heartbeat (a write of its item renews nothing: the others
	// see its checkpoints only when they scan, which they do when an owner
	// changes). One reader at a time may read the shard, and hand out
	// records until the lease period since the later of the two has
	// passed.
	leaseHeld leaseState = iota
	// leaseFenced: not renewed for a lease period (no heartbeat answered
	// in time). Its reader was stopped, since another instance may take
	// the lease now; what that reader handed out still counts when
	// acknowledged, since the lease may still be this instance's. A write
	// at the same counter (nobody took it) sent after a heartbeat that
	// listed it was answered makes it held again, renewed from that
	// heartbeat, and the next reader starts after the last acknowledged
	// record: nothing is read twice.
	leaseFenced
	// leaseHandingOver: a live instance asked for it. Its reader was
	// stopped; once what the reader handed out is settled, the last
	// checkpoint is written and the lease handed over in one write.
	leaseHandingOver
	// leaseReleased: given up by its last write (handed over, freed at a
	// clean stop, or its shard ended). Terminal.
	leaseReleased
	// leaseLost: taken by another instance, or dropped with the stream's
	// state. Terminal: what its reader acknowledges later counts nowhere.
	leaseLost
)

var leaseStateNames = [...]string{"held", "fenced", "handing over", "released", "lost"}

func (s leaseState) String() string { return leaseStateNames[s] }

// heldLease is one lease in the book. Only the book's methods read or
// change it, under the book's lock.
type heldLease struct {
	shard   string
	state   leaseState
	counter int64 // the item's counter as this instance last wrote it
	// epoch is the epoch of the positions the lease was taken in (see
	// coord.Positions): what its writes store counts for that stream only,
	// not for one created again under its name since.
	epoch int
	// renewed is when the last renewal of the lease was sent: its take, or
	// a heartbeat that listed it and was answered before the lease lapsed.
	// The lease lapses a lease period later.
	renewed time.Time
	// beatSent and beatAnswered are the last heartbeat that listed the
	// lease while it was fenced: a write of its item sent after that
	// answer, at its counter, shows nobody took it before the heartbeat
	// landed, and every instance that had not taken it by then saw the
	// heartbeat (see wrote).
	beatSent, beatAnswered time.Time
	// cp is the checkpoint to store: the shard's start, the position its
	// readers' acknowledgements reached, its end.
	cp      checkpoint.Checkpoint
	written checkpoint.Checkpoint // as last stored
	// reader is the grant of the reader reading the shard, from its start
	// until what it handed out is settled; nil while none.
	reader *leaseGrant
	// to is the instance the lease goes to (leaseHandingOver), toNonce
	// the nonce of its process that asked; asked is when the ask was
	// acted on, and settleBy until when the reader is waited for.
	to       string
	toNonce  string
	asked    time.Time
	settleBy time.Time
	// clearAsk is set when an instance known dead asked for the lease: the
	// next write removes the ask, so that others may ask.
	clearAsk bool
	// lost is the ID of the last write that failed without an answer: it
	// may have been applied, moving the counter (see lease.Write.After and
	// leaseCoordinator.writeFailed). Empty when the last write answered.
	lost string
	// outlived is set on the leases in the book when a beat wrote this
	// process's entry anew: an instance removed it as dead, and may take
	// them without reading its beat again (leaseView.outlived). No later
	// beat revives them once fenced; they are given up (see due).
	outlived bool
	// fencedAt is when the lease first lapsed since a reader was last
	// granted it: renewals that come back too late to read it again do
	// not reset it.
	fencedAt time.Time
	// meter measures the bytes its readers read: the lease's load, which
	// the heartbeat publishes. Safe without the book's lock.
	meter rate.Meter
}

// leaseBook is the state machine of the leases one instance holds on one
// stream: every transition is a method below, with the invariant it keeps.
// Its lock is a leaf of the lock order (see the package comment): no other lock is
// taken under it, and nothing outside it takes it.
type leaseBook struct {
	period time.Duration

	mu   sync.Mutex
	held map[string]*heldLease // by shard id; never a released or lost one
	// wake receives (never blocking) when a lease may be read again
	// without a cycle: renewed after a fence, or its handover withdrawn.
	wake chan struct{}
}

func newLeaseBook(period time.Duration) *leaseBook {
	return &leaseBook{period: period, held: map[string]*heldLease{}, wake: make(chan struct{}, 1)}
}

func (b *leaseBook) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// loadWindow is the time constant of a lease's meter, in lease periods:
// three smooth the shards' own noise well below the balance's margin (the
// meters measure arrivals, so a reader's pauses and catch-ups add none), and a
// shard turned ten times hotter still weighs three times its old rate a
// lease period later.
const loadWindow = 3

// took enters a lease just taken (or handed to this instance), as the take
// left its item, sent at sent, in epoch: held, its checkpoint the item's.
// load is the shard's rate as its last holder published it, when known:
// the meter starts from it, so that a lease that moved weighs what it did
// at once, rather than nothing and then a young meter's noisy guess.
// Invariant: a lease of the shard already in the book was lost on the way
// (its item changed hands and came back): it is lost here, and its reader
// and acknowledgements no longer count.
func (b *leaseBook) took(it lease.Shard, sent time.Time, epoch int, load float64, measured bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.held[it.ShardID]; ok {
		b.end(old, leaseLost, errLeaseLost)
	}
	h := &heldLease{shard: it.ShardID, counter: it.Counter, epoch: epoch, renewed: sent, cp: it.Checkpoint, written: it.Checkpoint}
	h.meter.Window = loadWindow * b.period
	if measured {
		h.meter.Seed(load, sent)
	}
	b.held[it.ShardID] = h
}

// grant gives a reader the right to read a shard: only a held lease,
// renewed within the lease period, with no other reader still running or
// settling, and no write of it without an answer (a handover or release
// may have landed: the next write tells). The reader starts after the last
// acknowledged record.
func (b *leaseBook) grant(c *leaseCoordinator, shardID string, stop context.CancelCauseFunc, now time.Time) (*leaseGrant, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[shardID]
	if !ok || h.state != leaseHeld || h.reader != nil || h.lost != "" || now.Sub(b.validFrom(h)) >= b.period {
		return nil, false
	}
	g := &leaseGrant{c: c, h: h, cp: h.cp, stop: stop}
	h.reader, h.fencedAt = g, time.Time{}
	return g, true
}

// reads reports whether g reads its lease now. Must hold b.mu.
func (b *leaseBook) reads(g *leaseGrant) bool {
	return b.held[g.h.shard] == g.h && g.h.reader == g
}

// ack moves the lease's checkpoint to pos, acknowledged by g's reader.
// Invariant: only the lease's current reader moves it, in any state but
// released or lost (a fenced or handed-over lease's reader is settling:
// its acknowledgements are what the next holder starts after), and never
// back.
func (b *leaseBook) ack(g *leaseGrant, pos checkpoint.Position) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reads(g) {
		return
	}
	if cp := g.h.cp.Position; cp == nil || cp.Less(pos) {
		g.h.cp.Position = &pos
	}
}

// until is when g's reader must stop handing out records: a lease period
// after the last renewal, while the lease is held and g reads it; the zero
// time (long past) otherwise.
func (b *leaseBook) until(g *leaseGrant) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reads(g) || g.h.state != leaseHeld {
		return time.Time{}
	}
	return b.validFrom(g.h).Add(b.period)
}

// validFrom is when a lease was last renewed (see heldLease.renewed).
// Must hold b.mu.
func (b *leaseBook) validFrom(h *heldLease) time.Time { return h.renewed }

// beaten records a successful heartbeat that listed the leases listed,
// sent at sent and answered at answered. Each of them that had not lapsed
// by the answer is renewed from sent; one that had (the heartbeat was
// answered late: throttled, retried, or the process was paused) is fenced:
// another instance may have counted it expired and taken it while the
// heartbeat was on its way, by a take conditional on the item alone, and
// only a write of its own item at its counter shows nobody did (see
// wrote). A heartbeat alone never revives a lease, and renews none it did
// not list; one that wrote this process's beat anew (revives false: an
// instance removed it as dead, and may take the process's leases without
// reading its beat again, see leaseView.outlived) revives none either,
// then or ever after: every lease in the book then is outlived. (Sim seed
// 2680: the next beat after one written anew revived a fenced lease, which
// its remover took at once.)
func (b *leaseBook) beaten(sent, answered time.Time, listed []string, revives bool) (fenced []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fenced = b.fenceLocked(answered)
	for _, h := range b.held {
		if !revives {
			h.outlived = true
		}
		if !h.outlived && h.state == leaseFenced && sent.After(h.renewed) {
			h.beatSent, h.beatAnswered = sent, answered
		}
	}
	for _, id := range listed {
		h, ok := b.held[id]
		if !ok || h.outlived || (h.state != leaseHeld && h.state != leaseHandingOver) {
			continue
		}
		if answered.Sub(h.renewed) >= b.period {
			continue // lapsed before the answer (a lease being handed over is not fenced: its ask may be withdrawn)
		}
		if sent.After(h.renewed) {
			h.renewed = sent
		}
	}
	return fenced
}

// settling registers cancel as what ends the settle wait of g's reader
// once it no longer counts (detached: see handover); it reports whether g
// reads its lease now (false: the wait is pointless).
func (b *leaseBook) settling(g *leaseGrant, cancel context.CancelFunc) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reads(g) {
		return false
	}
	g.settle = cancel
	return true
}

// readerStopped detaches g's reader, stopped and settled: the lease may be
// read again (held), or handed over now (handingOver). It returns the
// write that hands over, when one is due (see handover).
func (b *leaseBook) readerStopped(g *leaseGrant, now time.Time, judge askerJudge) (leaseWrite, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reads(g) {
		return leaseWrite{}, false
	}
	g.h.reader = nil
	if g.h.state == leaseHandingOver {
		return b.handover(g.h, now, judge)
	}
	return leaseWrite{}, false
}

// ending records that the shard was read to its end after last, and
// returns the write that stores the end and releases the lease. Only the
// current reader of a held lease ends it.
func (b *leaseBook) ending(g *leaseGrant, last *checkpoint.Position) (leaseWrite, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reads(g) || g.h.state != leaseHeld {
		return leaseWrite{}, false
	}
	h := g.h
	if last != nil && (h.cp.Position == nil || h.cp.Position.Less(*last)) {
		h.cp.Position = last
	}
	h.cp.Ended = true
	cp := h.cp
	return leaseWrite{h: h, counter: h.counter, cp: cp, w: lease.Write{Checkpoint: &cp, Release: true}}, true
}

// fence stops the readers of held leases not renewed within the lease
// period: another instance may take them now. The lease stays in the book,
// fenced: a later renewal that succeeds makes it held again.
func (b *leaseBook) fence(now time.Time) (fenced []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fenceLocked(now)
}

// fenceLocked is fence; must hold b.mu.
func (b *leaseBook) fenceLocked(now time.Time) (fenced []string) {
	for id, h := range b.held {
		if h.state == leaseHeld && now.Sub(b.validFrom(h)) >= b.period {
			h.state = leaseFenced
			if h.fencedAt.IsZero() {
				// From when it lapsed, not from when that was noticed: a
				// slow table delays both the noticing and the commits
				// that give it up (sim seed 10330).
				h.fencedAt = b.validFrom(h).Add(b.period)
			}
			if h.reader != nil {
				h.reader.stop(errLeaseExpired)
			}
			fenced = append(fenced, id)
		}
	}
	slices.Sort(fenced)
	return fenced
}

// askedFor starts handing a held lease over to the process nonce of the
// instance to, whose ask was first seen at seen and is acted on at now:
// its reader stops, and once what it handed out is settled (at once
// without a reader; a lease period at most) the handover is due, if the
// asker is alive then (see handover). It returns the handover write when
// it is due now.
func (b *leaseBook) askedFor(shardID, to, nonce string, seen, now time.Time, judge askerJudge) (leaseWrite, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[shardID]
	if !ok || h.state != leaseHeld {
		return leaseWrite{}, false
	}
	h.state, h.to, h.toNonce, h.asked, h.settleBy = leaseHandingOver, to, nonce, seen, now.Add(b.period)
	if h.reader != nil {
		h.reader.stop(errHandoff)
		return leaseWrite{}, false
	}
	return b.handover(h, now, judge)
}

// askerVerdict is what an instance knows of a process that asked for a
// lease (see leaseView.judge).
type askerVerdict int

const (
	askerUnknown askerVerdict = iota // not seen alive yet, not known dead
	askerAlive
	askerDead
)

// askerJudge tells whether the process nonce of instance id, whose ask was
// first seen at asked, is alive.
type askerJudge func(id, nonce string, asked time.Time) askerVerdict

// handover decides, at now, about a lease being handed over (must hold
// b.mu), by what is known of the asker then: known dead, the lease is held
// again (read on after its reader settled) and the next write removes the
// ask; not known either way, nothing yet; alive, the handover write once
// the reader settled, or once it did not within a lease period of the ask
// (settleBy): what it handed out and is not acknowledged by then is read
// again by the next holder. The reader stays attached until the handover
// lands: should it not (the asker withdrew or died meanwhile), its
// acknowledgements still count, and the next reader here starts after
// them. So a lease is never handed to a process known dead, nor waits on a
// reader for longer than a lease period.
func (b *leaseBook) handover(h *heldLease, now time.Time, judge askerJudge) (leaseWrite, bool) {
	switch judge(h.to, h.toNonce, h.asked) {
	case askerDead:
		h.state, h.to, h.toNonce, h.clearAsk = leaseHeld, "", "", true
		if h.reader == nil {
			b.signal()
		}
		return leaseWrite{}, false
	case askerUnknown:
		return leaseWrite{}, false
	}
	unsettled := h.reader != nil
	if unsettled && now.Before(h.settleBy) {
		return leaseWrite{}, false
	}
	cp := h.cp
	w := lease.Write{Release: true, HandOver: h.to, HandOverNonce: h.toNonce}
	if !sameCheckpoint(cp, h.written) {
		w.Checkpoint = &cp
	}
	return leaseWrite{h: h, counter: h.counter, cp: cp, w: w, unsettled: unsettled}, true
}

// pendingHandover is a lease whose handover is due but for the verdict on
// its asker.
type pendingHandover struct {
	shard, to, toNonce string
	asked              time.Time
}

// handoversDue returns the leases being handed over whose reader settled
// (or was waited for long enough) at now: their handover waits only for
// the verdict on the asker.
func (b *leaseBook) handoversDue(now time.Time) []pendingHandover {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []pendingHandover
	for _, id := range slices.Sorted(maps.Keys(b.held)) {
		h := b.held[id]
		if h.state == leaseHandingOver && (h.reader == nil || !now.Before(h.settleBy)) {
			out = append(out, pendingHandover{shard: id, to: h.to, toNonce: h.toNonce, asked: h.asked})
		}
	}
	return out
}

// clearAsk marks a held lease's ask for removal: the asker is dead.
func (b *leaseBook) clearAsk(shardID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[shardID]; ok {
		h.clearAsk = true
	}
}

// due returns the writes a commit makes at now, by shard: every held
// lease whose checkpoint moved, whose ask is to be removed, or whose last
// write had no answer (the next one tells where it stands), every fenced
// lease (a write at its counter tells whether it is still this
// instance's), and every handover due (see handover; a handover write that
// failed is tried again). A held lease whose checkpoint stays is not
// written: the heartbeat renews it.
func (b *leaseBook) due(now time.Time, judge askerJudge) []leaseWrite {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ws []leaseWrite
	for _, id := range slices.Sorted(maps.Keys(b.held)) {
		h := b.held[id]
		if h.state == leaseHandingOver {
			if w, ok := b.handover(h, now, judge); ok {
				ws = append(ws, w)
				continue
			}
		}
		switch h.state {
		case leaseHeld, leaseFenced:
			changed := !sameCheckpoint(h.cp, h.written)
			if !changed && !h.clearAsk && h.lost == "" && h.state == leaseHeld {
				continue // the heartbeat renews it
			}
			w := lease.Write{KeepAsked: !h.clearAsk}
			cp := h.cp
			if changed {
				w.Checkpoint = &cp
			}
			if cp.Ended {
				w.Release = true // an end stored releases the lease
			}
			giveUp := h.state == leaseFenced && now.Sub(h.fencedAt) >= b.period
			if giveUp {
				// Its renewals have not come back in time for a lease
				// period (the table answers too late): each that applied
				// kept the lease from expiring to others while it is read
				// by nobody. It is freed instead, at its last checkpoint.
				w.Release, w.KeepAsked = true, false
			}
			ws = append(ws, leaseWrite{h: h, counter: h.counter, cp: cp, w: w, givenUp: giveUp})
		}
	}
	return ws
}

// wrote records a successful write w, sent at sent, whose answer is it.
// A release or handover ends the lease (released); any other write keeps
// it at the item's counter. A write renews nothing, but a fenced lease
// written after a heartbeat that listed it was answered is held again,
// renewed from that heartbeat (see beatSent), and may be read at once
// (its reader, if still settling, detaches first).
func (b *leaseBook) wrote(w leaseWrite, it lease.Shard, sent time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := w.h
	if b.held[h.shard] != h {
		return
	}
	if w.w.Release {
		b.end(h, leaseReleased, nil)
		return
	}
	h.counter, h.lost = it.Counter, ""
	if w.w.Checkpoint != nil {
		h.written = w.cp
	}
	if !w.w.KeepAsked {
		h.clearAsk = false
	}
	if h.state == leaseFenced && !h.beatAnswered.IsZero() && sent.After(h.beatAnswered) && h.beatSent.After(h.renewed) {
		h.renewed = h.beatSent
		if sent.Sub(h.renewed) < b.period {
			h.state = leaseHeld
		}
	}
	if h.state == leaseHeld && h.reader == nil {
		b.signal() // readable now (its reader may have stopped at the lapse)
	}
}

// withdrawn records that the process a lease was being handed to
// withdrew its ask (it is stopping), or was replaced by another process of
// its name: the lease is held again, as it was.
func (b *leaseBook) withdrawn(w leaseWrite) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := w.h; b.held[h.shard] == h && h.state == leaseHandingOver {
		h.state, h.to, h.toNonce = leaseHeld, "", ""
		b.signal()
	}
}

// uncertain records that w failed without an answer: it may have been
// applied, and the item's counter moved past the one the book has.
func (b *leaseBook) uncertain(w leaseWrite) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.h.lost = w.w.ID
}

// isUncertain reports whether an earlier write of w's lease failed
// without an answer.
func (b *leaseBook) isUncertain(w leaseWrite) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.h.lost != ""
}

// stamp gives w an ID of its own, and the ID of the last write of its
// lease that failed without an answer (lease.Write.After): w applies one
// counter on if that write was applied, and is its item's last.
func (b *leaseBook) stamp(w leaseWrite) leaseWrite {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.w.ID, w.w.After = lease.NewWriteID(), w.h.lost
	return w
}

// recount takes the counter of w's lease as read back from its item,
// still this instance's after a write without an answer: the next write
// is conditional on it, and stores the checkpoint again. The write without
// an answer stays the one the next names (lease.Write.After) until a write
// answers: it may still be on its way, and land after the read (sim seed
// 422: it did, and the next write, one counter behind it, found the lease
// "taken").
func (b *leaseBook) recount(w leaseWrite, counter int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := w.h; b.held[h.shard] == h {
		h.counter = counter
		h.written = checkpoint.Checkpoint{}
	}
}

// handedOverUnanswered ends w's lease as handed over, and reports whether
// it did, when its item read back (it) shows that the handover this
// instance sent and got no answer to landed: the lease was being handed
// over, and the item is the asker's process's one counter on, with a
// checkpoint other than the last one stored, which only the handover
// wrote (a take by the asker, its only other way there, keeps the
// checkpoint). A handover that stored no new checkpoint cannot be told
// from such a take: the lease is lost then, as any taken.
func (b *leaseBook) handedOverUnanswered(w leaseWrite, it lease.Shard) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := w.h
	if b.held[h.shard] != h || h.state != leaseHandingOver || h.lost == "" || it.Owner != h.to ||
		(h.toNonce != "" && it.OwnerNonce != h.toNonce) || it.Counter != h.counter+1 || sameCheckpoint(it.Checkpoint, h.written) {
		return false
	}
	b.end(h, leaseReleased, nil)
	return true
}

// lose ends w's lease: another instance took it. Its reader stops now.
func (b *leaseBook) lose(w leaseWrite) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[w.h.shard] != w.h {
		return false
	}
	b.end(w.h, leaseLost, errLeaseLost)
	return true
}

// scanned takes in a scanned item: a lease this instance holds whose item
// another instance wrote since (another owner, or none, at a higher
// counter: counters only rise) was taken, and is lost. A scan may be
// older than this instance's last write, never newer than another's take.
func (b *leaseBook) scanned(it lease.Shard, me, nonce string) (lost bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[it.ShardID]
	if !ok || (it.Owner == me && it.OwnerNonce == nonce) || it.Counter <= h.counter {
		return false
	}
	b.end(h, leaseLost, errLeaseLost)
	return true
}

// loads returns the measured load (the rate bytes arrive at the shard, see
// rate.Meter), in bytes a second, of every lease held whose meter ran long
// enough to measure, by shard.
func (b *leaseBook) loads() map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]float64, len(b.held))
	for id, h := range b.held {
		if r, warm := h.meter.Rate(); warm {
			out[id] = r
		}
	}
	return out
}

// presence returns what a heartbeat publishes: the leases it renews
// (listed) and the measured load of each of them.
func (b *leaseBook) presence() (listed []string, loads map[string]float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	listed = make([]string, 0, len(b.held))
	loads = make(map[string]float64, len(b.held))
	for id, h := range b.held {
		if h.state != leaseHeld && h.state != leaseHandingOver {
			continue
		}
		listed = append(listed, id)
		if r, warm := h.meter.Rate(); warm {
			loads[id] = r
		}
	}
	slices.Sort(listed)
	return listed, loads
}

// released reports whether w's lease was released (by w, as it ends the
// lease on success).
func (b *leaseBook) released(w leaseWrite) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.h.state == leaseReleased
}

// behind reports whether it is older than this instance's last write of
// its lease (a scan taken before it; scans are rare): an ask it shows may
// be one that write removed.
func (b *leaseBook) behind(it lease.Shard) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[it.ShardID]
	return ok && it.Counter < h.counter
}

// holds reports whether the book has a lease of the shard (in any state).
func (b *leaseBook) holds(shardID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.held[shardID]
	return ok
}

// dropAll ends every lease with cause: the stream's state is gone (it was
// deleted and created again), or another process took over this
// instance's name. Every reader stops now; their acknowledgements count
// nowhere.
func (b *leaseBook) dropAll(cause error) (dropped []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(b.held)) {
		b.end(b.held[id], leaseLost, cause)
		dropped = append(dropped, id)
	}
	return dropped
}

// releaseAll ends every lease, and returns the writes that store each
// one's last checkpoint and free it: at a clean stop, when the readers
// have stopped by then, or when another process took over this instance's
// name (cause, which stops the readers).
func (b *leaseBook) releaseAll(cause error) []leaseWrite {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ws []leaseWrite
	for _, id := range slices.Sorted(maps.Keys(b.held)) {
		h := b.held[id]
		cp := h.cp
		w := lease.Write{Release: true}
		if cp.Position != nil || cp.Ended {
			w.Checkpoint = &cp
		}
		ws = append(ws, leaseWrite{h: h, counter: h.counter, cp: cp, w: w})
		b.end(h, leaseReleased, cause)
	}
	return ws
}

// end moves h to a terminal state and out of the book, stopping its
// reader with cause (none when nil). Must hold b.mu.
func (b *leaseBook) end(h *heldLease, state leaseState, cause error) {
	h.state = state
	if h.reader != nil {
		if cause != nil {
			h.reader.stop(cause)
		}
		h.reader.detach()
	}
	h.reader = nil
	if b.held[h.shard] == h {
		delete(b.held, h.shard)
	}
}

// count is the number of leases in the book.
func (b *leaseBook) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// oldestRenewal is how long ago the least recently renewed lease was
// renewed (by its item's write or the heartbeat).
func (b *leaseBook) oldestRenewal(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var oldest time.Duration
	for _, h := range b.held {
		oldest = max(oldest, now.Sub(b.validFrom(h)))
	}
	return oldest
}

// stateOf returns a shard's lease state, for tests and logs.
func (b *leaseBook) stateOf(shardID string) (leaseState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[shardID]
	if !ok {
		return 0, false
	}
	return h.state, true
}

// leaseWrite is one conditional write of a held lease: at counter, w; cp
// is the checkpoint it stores, when w stores one. unsettled is set on a
// handover whose reader did not settle within a lease period, givenUp on
// the release of a lease fenced for a lease period.
type leaseWrite struct {
	h         *heldLease
	counter   int64
	w         lease.Write
	cp        checkpoint.Checkpoint
	unsettled bool
	givenUp   bool
}

func (w leaseWrite) shard() string { return w.h.shard }

// sameCheckpoint reports whether two checkpoints store the same position
// and end.
func sameCheckpoint(a, b checkpoint.Checkpoint) bool {
	if a.Ended != b.Ended || (a.Position == nil) != (b.Position == nil) {
		return false
	}
	return a.Position == nil || *a.Position == *b.Position
}
