package input

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// leaseWriters bounds the lease writes a commit makes at once.
const leaseWriters = 16

// commitLeases is commit with a lease table (saveMu held): it stores the
// items of newly pinned shards, deletes those of shards gone, renews this
// instance's presence, and writes every held lease whose checkpoint moved,
// whose shard ended, that is to be handed over, or that is due for renewal
// (a third of the lease period since its last write). A write whose lease
// was taken stops the shard's reader at once.
func (p *positions) commitLeases(ctx context.Context) error {
	l := p.leases
	var errs []error
	now := time.Now()

	type job struct {
		id      string
		counter int64
		w       lease.Write
		cp      checkpoint.Checkpoint
	}
	var jobs []job
	p.mu.Lock()
	l.mu.Lock()
	for id, h := range l.held {
		cp, ok := p.state.Shards[id]
		if !ok {
			// Forgotten (gone past the retention period, or a stream
			// created again): free it rather than hold it for ever.
			jobs = append(jobs, job{id: id, counter: h.counter, w: lease.Write{Release: true}})
			continue
		}
		changed := !sameCheckpoint(cp, h.written)
		handing := h.handoff != "" && h.stop == nil && h.gen == 0
		if !changed && !handing && !cp.Ended && !h.clearAsk && now.Sub(h.renewed) < l.period/3 {
			continue
		}
		w := lease.Write{KeepAsked: !h.clearAsk}
		if changed || cp.Ended {
			c := cp
			w.Checkpoint = &c
		}
		if cp.Ended {
			w.Release = true
		} else if handing {
			w.Release, w.HandOver, w.KeepAsked = true, h.handoff, false
		}
		jobs = append(jobs, job{id: id, counter: h.counter, w: w, cp: cp})
	}
	l.mu.Unlock()
	p.mu.Unlock()

	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, leaseWriters)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sent := time.Now()
			// Each write is bounded: one that hangs must not hold the
			// renewal of the others past their lease period.
			wctx, cancel := context.WithTimeout(ctx, l.period/3)
			it, err := l.table.Hold(wctx, l.arn, j.id, l.me, j.counter, j.w)
			cancel()
			if err != nil {
				if err := p.leaseWriteFailed(ctx, j.id, err); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return
			}
			p.leaseWritten(j.id, it, j.w, j.cp, sent)
		}()
	}
	wg.Wait()
	if now.Sub(l.beat) >= l.period/3 {
		hctx, cancel := context.WithTimeout(ctx, l.period/3)
		if err := l.table.Heartbeat(hctx, l.arn, l.me); err != nil {
			errs = append(errs, err)
		} else {
			l.beat = now
		}
		cancel()
	}
	if err := errors.Join(errs...); err != nil {
		p.metrics.commitFailures.Incr(1, p.stream)
		return fmt.Errorf("stream %s: lease table: %w", p.stream, err)
	}
	if len(jobs) > 0 {
		p.metrics.commits.Incr(1, p.stream)
	}
	return nil
}

// leaseWriteFailed handles a failed write of a held lease: a lease taken
// meanwhile is lost (its reader stops now); anything else is retried by the
// next commit, the reader stopping on its own once the lease period passes
// without a renewal.
//
// A write that failed without an answer (a time-out, a cancelled context, a
// broken connection) may have been applied: the lease's counter is then
// uncertain, and the next write's condition fails against this instance's
// own write. So a lease found not as written after such a failure is read
// back: still this instance's (only its own writes keep it the owner), it
// takes the counter it finds, and the next commit writes again.
func (p *positions) leaseWriteFailed(ctx context.Context, id string, err error) error {
	l := p.leases
	if errors.Is(err, lease.ErrWithdrawn) {
		// The taker is stopping: the lease stays, and is read again.
		l.mu.Lock()
		if h, ok := l.held[id]; ok {
			h.handoff = ""
		}
		l.mu.Unlock()
		return nil
	}
	if !errors.Is(err, lease.ErrLost) {
		l.mu.Lock()
		if h, ok := l.held[id]; ok {
			h.uncertain = true
		}
		l.mu.Unlock()
		p.metrics.renewalFailures.Incr(1, p.stream)
		return err
	}
	l.mu.Lock()
	h, ok := l.held[id]
	uncertain := ok && h.uncertain
	l.mu.Unlock()
	if uncertain {
		it, found, gerr := l.table.Get(ctx, l.arn, id)
		if gerr != nil {
			p.metrics.renewalFailures.Incr(1, p.stream)
			return gerr
		}
		if found && it.Owner == l.me {
			l.mu.Lock()
			if h, ok := l.held[id]; ok {
				h.counter, h.uncertain = it.Counter, false
				h.written = checkpoint.Checkpoint{} // written again next
			}
			l.mu.Unlock()
			return nil
		}
	}
	l.lose(id, errLeaseLost)
	p.metrics.leasesLost.Incr(1, p.stream)
	p.warnf("stream %s shard %s: its lease was taken by another instance: stopped reading it; acknowledgements still to come no longer move its checkpoint", p.stream, id)
	return nil
}

// leaseWritten records a successful write of a held lease, sent at sent.
func (p *positions) leaseWritten(id string, it lease.Shard, w lease.Write, cp checkpoint.Checkpoint, sent time.Time) {
	l := p.leases
	l.mu.Lock()
	h, ok := l.held[id]
	if !ok {
		l.mu.Unlock()
		return
	}
	if w.Release {
		delete(l.held, id)
	} else {
		h.counter, h.renewed = it.Counter, sent
		if w.Checkpoint != nil {
			h.written = cp
		}
		if !w.KeepAsked {
			h.clearAsk = false
		}
		h.uncertain = false
	}
	asked := it.HandoffTo
	l.mu.Unlock()
	if w.Release {
		if cp.Ended {
			p.mu.Lock()
			p.endsSaved[id] = true
			p.mu.Unlock()
		}
		if w.HandOver != "" {
			p.metrics.leasesHandedOver.Incr(1, p.stream)
			p.infof("stream %s shard %s: handed its lease over to %s after its last checkpoint", p.stream, id, w.HandOver)
		}
		return
	}
	if asked != "" && asked != l.me {
		p.askedFor(id, asked)
	}
}

// askedFor starts the handoff of a held lease to the instance that asked
// for it, if that instance lives: the reader stops, its acknowledgements are
// awaited, and the next commit writes the last checkpoint and hands over.
func (p *positions) askedFor(id, to string) {
	l := p.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[id]
	if !ok || h.handoff != "" {
		return
	}
	if !l.workers[to] {
		h.clearAsk = true
		return
	}
	h.handoff = to
	if h.stop != nil {
		// The reader's goroutine hands over once it has stopped and its
		// acknowledgements are in (readerEnded, handOver).
		h.stop(errHandoff)
	} else {
		h.gen = 0 // no reader: the next commit hands over
	}
}

// drained records that the reader of a lease being handed over has stopped
// and its acknowledgements are in: the next commit hands the lease over.
func (p *positions) drained(id string, gen int64) {
	l := p.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[id]; ok && h.gen == gen {
		h.gen = 0
	}
}

// storePinned creates the items of newly pinned shards, and deletes those of
// shards gone past the retention period. A shard pinned meanwhile by another
// instance keeps that instance's start; an item of a shard that started
// elsewhere (a stream deleted and created again) is replaced.
func (p *positions) storePinned(ctx context.Context) error {
	l := p.leases
	p.mu.Lock()
	type pinned struct {
		id      string
		parents []string
		cp      checkpoint.Checkpoint
	}
	var todo []pinned
	for id, parents := range p.unstored {
		todo = append(todo, pinned{id, parents, p.state.Shards[id]})
	}
	gone := p.gone
	p.gone = nil
	epoch := p.epoch
	p.mu.Unlock()

	var errs []error
	var errMu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, leaseWriters)
	for _, pn := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := p.storeOne(ctx, pn.id, pn.parents, pn.cp, epoch); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, id := range gone {
		if err := l.table.Delete(ctx, l.arn, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// storeOne creates the item of one pinned shard (see storePinned).
func (p *positions) storeOne(ctx context.Context, id string, parents []string, cp checkpoint.Checkpoint, epoch int) error {
	l := p.leases
	want := lease.Shard{Stream: l.arn, ShardID: id, Checkpoint: cp, Parents: parents}
	got, err := l.table.Create(ctx, want)
	if err == nil && got.Checkpoint.ShardStart != "" && cp.ShardStart != "" && got.Checkpoint.ShardStart != cp.ShardStart {
		got, err = want, l.table.Replace(ctx, want, got.Checkpoint.ShardStart)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.unstored[id]; ok && epoch == p.epoch {
		delete(p.unstored, id)
		p.state.Shards[id] = got.Checkpoint
		if got.Checkpoint.Ended {
			p.endsSaved[id] = true
		}
	}
	return nil
}

// isUnstored reports whether a shard is pinned and its item not yet created.
func (p *positions) isUnstored(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.unstored[id]
	return ok
}

// observe takes in the shard items of a scan: the checkpoints and ends of
// shards this instance does not hold (a parent finished elsewhere lets its
// children be read; a lease taken starts at its item's checkpoint).
func (p *positions) observe(items []lease.Shard) {
	l := p.leases
	p.mu.Lock()
	defer p.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range items {
		if _, held := l.held[it.ShardID]; held {
			continue
		}
		cp, known := p.state.Shards[it.ShardID]
		if !known {
			continue // pinned by another instance: this one pins it once listed
		}
		if _, pinned := p.unstored[it.ShardID]; pinned {
			continue
		}
		if cp.ShardStart != "" && it.Checkpoint.ShardStart != "" && cp.ShardStart != it.Checkpoint.ShardStart {
			// Of a stream deleted and created again, by one side or the
			// other: discovery sorts it out (reused), not a scan.
			continue
		}
		p.state.Shards[it.ShardID] = it.Checkpoint
		if it.Checkpoint.Ended {
			p.endsSaved[it.ShardID] = true
		} else {
			delete(p.endsSaved, it.ShardID)
		}
	}
}

// took records a lease just taken: the shard is read from its item's
// checkpoint.
func (p *positions) took(it lease.Shard, at time.Time) {
	l := p.leases
	p.mu.Lock()
	defer p.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[it.ShardID] = &heldLease{counter: it.Counter, renewed: at, written: it.Checkpoint}
	p.state.Shards[it.ShardID] = it.Checkpoint
}

// releaseAll writes the last checkpoint of every held lease and frees it,
// withdraws this instance's asks for leases of others, frees the leases
// handed to it and not taken up yet, and removes its presence: a clean stop,
// after which other instances take the shards and read on exactly after the
// last acknowledged record, and no lease is left in this instance's name.
func (p *positions) releaseAll(ctx context.Context) error {
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	l := p.leases
	p.mu.Lock()
	l.mu.Lock()
	held := map[string]lease.Shard{}
	for id, h := range l.held {
		held[id] = lease.Shard{ShardID: id, Counter: h.counter, Checkpoint: p.state.Shards[id]}
	}
	l.held = map[string]*heldLease{}
	l.mu.Unlock()
	p.mu.Unlock()

	var errs []error
	release := func(it lease.Shard) {
		cp := it.Checkpoint
		if err := p.release(ctx, it.ShardID, it.Counter, cp); err != nil {
			errs = append(errs, fmt.Errorf("stream %s shard %s: releasing its lease: %w", p.stream, it.ShardID, err))
		}
	}
	for _, it := range held {
		release(it)
	}
	// A handover to this instance either lands before its ask is withdrawn
	// (and is released below) or fails (the holder keeps the lease).
	for pass := 0; pass < 2; pass++ {
		sc, err := l.table.ScanConsistent(ctx, l.arn)
		if err != nil {
			errs = append(errs, err)
			break
		}
		for _, it := range sc.Shards {
			switch {
			case it.Owner == l.me:
				release(it)
			case pass == 0 && it.HandoffTo == l.me:
				if err := l.table.Withdraw(ctx, it, l.me); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := l.table.Leave(ctx, l.arn, l.me); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// release frees a lease held at counter, writing cp. A counter moved by an
// earlier write of this instance that failed without an answer (see
// leaseWriteFailed) is read back; a lease someone else took is no error.
func (p *positions) release(ctx context.Context, id string, counter int64, cp checkpoint.Checkpoint) error {
	l := p.leases
	w := lease.Write{Checkpoint: &cp, Release: true}
	if cp.Position == nil && !cp.Ended {
		w.Checkpoint = nil
	}
	_, err := l.table.Hold(ctx, l.arn, id, l.me, counter, w)
	if errors.Is(err, lease.ErrLost) {
		it, found, gerr := l.table.Get(ctx, l.arn, id)
		if gerr != nil {
			return gerr
		}
		if !found || it.Owner != l.me {
			return nil
		}
		_, err = l.table.Hold(ctx, l.arn, id, l.me, it.Counter, w)
	}
	if errors.Is(err, lease.ErrLost) {
		return nil
	}
	return err
}

// sameCheckpoint reports whether two checkpoints store the same position
// and end.
func sameCheckpoint(a, b checkpoint.Checkpoint) bool {
	if a.Ended != b.Ended || (a.Position == nil) != (b.Position == nil) {
		return false
	}
	return a.Position == nil || *a.Position == *b.Position
}

// adopt takes in the items another instance pinned: their shards are known
// with the start stored for them.
func (p *positions) adopt(items []lease.Shard) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, it := range items {
		if _, known := p.state.Shards[it.ShardID]; known {
			continue
		}
		p.state.Shards[it.ShardID] = it.Checkpoint
		if it.Checkpoint.Ended {
			p.endsSaved[it.ShardID] = true
		}
	}
}
