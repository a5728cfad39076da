package input

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// positions is the checkpoint state of one stream: where each shard starts,
// how far it is acknowledged, whether it was read to its end, and the saving
// of all that to the store. Shard readers change it (setPosition, setEnded),
// the commit loop and Close save it (commit), and the stream's run loop reads
// it to schedule readers. It is where a shared store plugs in.
//
// Every change carries the epoch of the state it was read from: a reset (the
// stream was deleted and created again) starts a new epoch, and readers of an
// older one can no longer change anything.
type positions struct {
	stream  string // the stream's name, for errors
	store   checkpoint.Store
	metrics *metrics
	log     *service.Logger // nil in unit tests

	// saveMu serializes saves, so that a later snapshot is never
	// overwritten by an earlier one; mu guards the rest.
	saveMu sync.Mutex
	mu     sync.Mutex
	state  checkpoint.Stream
	dirty  bool
	// endsSaved holds the shards whose end is in the store: only those let
	// their children be read (an end only in memory could be lost by a
	// crash, and the parent's tail then read again after its children).
	endsSaved map[string]bool
	epoch     int

	// leases is set when the stream shares a lease table with other
	// instances: the store is then unused, every shard has its own item, and
	// only the shards whose lease this instance holds are written.
	leases *leases
	// unstored holds the shards pinned and not yet in the table, with their
	// parents; gone the shards no longer listed whose items are to be
	// deleted (lease table only).
	unstored map[string][]string
	gone     []string
}

func newPositions(stream string, store checkpoint.Store, m *metrics, st checkpoint.Stream) *positions {
	p := &positions{stream: stream, store: store, metrics: m, state: st, endsSaved: map[string]bool{}}
	if p.state.Shards == nil {
		p.state.Shards = map[string]checkpoint.Checkpoint{}
	}
	for id, cp := range p.state.Shards {
		if cp.Ended {
			p.endsSaved[id] = true
		}
	}
	return p
}

// current returns the epoch of the state.
func (p *positions) current() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// of returns the checkpoint of a shard, and whether it has one.
func (p *positions) of(shardID string) (checkpoint.Checkpoint, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp, ok := p.state.Shards[shardID]
	return cp, ok
}

// endSaved reports whether a shard's end is in the store.
func (p *positions) endSaved(shardID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.endsSaved[shardID]
}

// pin gives every shard of shards without a checkpoint one that starts at
// start; it reports whether it added any (they are saved by the next commit).
func (p *positions) pin(shards []shardInfo, start checkpoint.Start) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	added := false
	for _, sh := range shards {
		if _, ok := p.state.Shards[sh.id]; !ok {
			p.state.Shards[sh.id] = checkpoint.Checkpoint{Start: start, ShardStart: sh.startSeq}
			added = true
			if p.leases != nil {
				p.unstored[sh.id] = sh.parents
			}
		}
	}
	if added {
		p.dirty = true
	}
	return added
}

// reused returns a shard of listed whose id has a checkpoint of a shard that
// started at another sequence number: the stream was created again.
func (p *positions) reused(listed map[string]shardInfo) (id, now, was string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cp := range p.state.Shards {
		if sh, ok := listed[id]; ok && cp.ShardStart != "" && sh.startSeq != "" && cp.ShardStart != sh.startSeq {
			return id, sh.startSeq, cp.ShardStart, true
		}
	}
	return "", "", "", false
}

// prune brings the checkpoints in line with a listing: a listed shard gets
// its starting sequence number if its checkpoint lacks it, and the
// checkpoint of a shard not listed (gone past the retention period) is
// dropped. It returns the dropped shards that had not been read to their end.
func (p *positions) prune(listed map[string]shardInfo) (unfinished []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cp := range p.state.Shards {
		if sh, ok := listed[id]; ok {
			if cp.ShardStart == "" && sh.startSeq != "" {
				cp.ShardStart = sh.startSeq
				p.state.Shards[id] = cp
				p.dirty = true
			}
			continue
		}
		if !cp.Ended {
			unfinished = append(unfinished, id)
		}
		delete(p.state.Shards, id)
		delete(p.endsSaved, id)
		if p.leases != nil {
			delete(p.unstored, id)
			if cp.Ended {
				// Gone past the retention period after it was read: its item
				// goes too. An unfinished one stays, in case the listing
				// that lacks it is only behind (it is never taken unlisted).
				p.gone = append(p.gone, id)
			}
		}
		p.dirty = true
	}
	return unfinished
}

// reset drops every checkpoint and starts a new epoch: the stream is a new
// one, created at created, under an old name.
func (p *positions) reset(created time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Shards = map[string]checkpoint.Checkpoint{}
	p.state.Created = created
	p.endsSaved = map[string]bool{}
	p.epoch++
	p.dirty = true
	if p.leases != nil {
		p.unstored = map[string][]string{}
		p.gone = nil
	}
}

// setPosition records a new acknowledged position of a shard; it is saved by
// the next commit. A reader of an older epoch, or of a shard forgotten since,
// or (with a lease table) a reader whose lease is no longer held, changes
// nothing.
func (p *positions) setPosition(shardID string, pos checkpoint.Position, epoch int, gen int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Checked under mu (the lock order is mu, then the leases'): a lease
	// taken anew (took) cannot be moved by an acknowledgement of an earlier
	// holding.
	if p.leases != nil && !p.leases.current(shardID, gen) {
		return
	}
	cp, ok := p.state.Shards[shardID]
	if !ok || epoch != p.epoch || (cp.Position != nil && !cp.Position.Less(pos)) {
		return
	}
	cp.Position = &pos
	p.state.Shards[shardID] = cp
	p.dirty = true
}

// setEnded records that a shard was read to its end and saves at once: its
// children wait until the end is saved.
func (p *positions) setEnded(ctx context.Context, shardID string, last *checkpoint.Position, epoch int, gen int64) error {
	p.mu.Lock()
	if p.leases != nil && !p.leases.current(shardID, gen) {
		p.mu.Unlock()
		return nil
	}
	cp, ok := p.state.Shards[shardID]
	if !ok || epoch != p.epoch {
		p.mu.Unlock()
		return nil
	}
	if last != nil {
		cp.Position = last
	}
	cp.Ended = true
	p.state.Shards[shardID] = cp
	p.dirty = true
	p.mu.Unlock()
	if p.leases != nil {
		// The commit writes every held lease of the stream: the end of this
		// reader's context must not cut the others' writes (each is bounded).
		ctx = context.WithoutCancel(ctx)
	}
	return p.commit(ctx)
}

// commit saves the checkpoints if anything changed. With a lease table it
// also renews the leases held.
func (p *positions) commit(ctx context.Context) error {
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	if p.leases != nil {
		return p.commitLeases(ctx)
	}
	p.mu.Lock()
	if !p.dirty {
		p.mu.Unlock()
		return nil
	}
	snap := p.state
	snap.Shards = maps.Clone(p.state.Shards)
	epoch := p.epoch
	p.dirty = false
	p.mu.Unlock()

	if err := p.store.Save(ctx, snap); err != nil {
		p.mu.Lock()
		p.dirty = true
		p.mu.Unlock()
		p.metrics.commitFailures.Incr(1, p.stream)
		return fmt.Errorf("stream %s: committing checkpoints: %w", p.stream, err)
	}
	p.mu.Lock()
	if epoch == p.epoch {
		for id, cp := range snap.Shards {
			if cp.Ended {
				p.endsSaved[id] = true
			}
		}
	}
	p.mu.Unlock()
	p.metrics.commits.Incr(1, p.stream)
	return nil
}

func (p *positions) warnf(format string, args ...any) {
	if p.log != nil {
		p.log.Warnf(format, args...)
	}
}

func (p *positions) infof(format string, args ...any) {
	if p.log != nil {
		p.log.Infof(format, args...)
	}
}
