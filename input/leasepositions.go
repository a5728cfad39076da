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
	if now.Sub(l.beat) >= l.period/3 {
		if err := l.table.Heartbeat(ctx, l.arn, l.me); err != nil {
			errs = append(errs, err)
		} else {
			l.beat = now
		}
	}
	if err := p.storePinned(ctx); err != nil {
		errs = append(errs, err)
	}

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
			w.Release, w.HandOver = true, h.handoff
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
			it, err := l.table.Hold(ctx, l.arn, j.id, l.me, j.counter, j.w)
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				p.leaseWriteFailed(j.id, j.w, err, &errs)
				return
			}
			p.leaseWritten(j.id, it, j.w, j.cp, sent)
		}()
	}
	wg.Wait()
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
func (p *positions) leaseWriteFailed(id string, w lease.Write, err error, errs *[]error) {
	if errors.Is(err, lease.ErrLost) {
		p.leases.lose(id, errLeaseLost)
		p.metrics.leasesLost.Incr(1, p.stream)
		p.warnf("stream %s shard %s: its lease was taken by another instance: stopped reading it; acknowledgements still to come no longer move its checkpoint", p.stream, id)
		return
	}
	p.metrics.renewalFailures.Incr(1, p.stream)
	*errs = append(*errs, err)
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
		h.stop(errHandoff)
		h.stop = nil // gen stays: the reader's late acknowledgements still count
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

// stored reports whether every pinned shard has its item.
func (p *positions) stored() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.unstored) == 0
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
		if _, known := p.state.Shards[it.ShardID]; !known {
			continue // pinned by another instance: this one pins it once listed
		}
		if _, pinned := p.unstored[it.ShardID]; pinned {
			continue
		}
		p.state.Shards[it.ShardID] = it.Checkpoint
		if it.Checkpoint.Ended {
			p.endsSaved[it.ShardID] = true
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
// then removes this instance's presence: a clean stop, after which other
// instances take the shards and read on exactly after the last
// acknowledged record.
func (p *positions) releaseAll(ctx context.Context) error {
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	l := p.leases
	p.mu.Lock()
	l.mu.Lock()
	type rel struct {
		id      string
		counter int64
		cp      checkpoint.Checkpoint
	}
	var rels []rel
	for id, h := range l.held {
		rels = append(rels, rel{id, h.counter, p.state.Shards[id]})
	}
	for id, it := range l.items {
		if _, held := l.held[id]; !held && it.Owner == l.me {
			// Handed over to this instance and not taken up yet.
			rels = append(rels, rel{id, it.Counter, it.Checkpoint})
		}
	}
	l.mu.Unlock()
	p.mu.Unlock()
	var errs []error
	for _, r := range rels {
		cp := r.cp
		_, err := l.table.Hold(ctx, l.arn, r.id, l.me, r.counter, lease.Write{Checkpoint: &cp, Release: true})
		if err != nil && !errors.Is(err, lease.ErrLost) {
			errs = append(errs, fmt.Errorf("stream %s shard %s: releasing its lease: %w", p.stream, r.id, err))
		}
		l.mu.Lock()
		delete(l.held, r.id)
		l.mu.Unlock()
	}
	if err := l.table.Leave(ctx, l.arn, l.me); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
