package coord

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Positions is what one stream's instance knows of where each shard stands:
// where it starts, how far it is acknowledged, whether it was read to its
// end and whether that end is durable. It stores nothing: its coordinator
// does. The stream's run loop reads it to schedule readers; the coordinator
// changes it.
//
// Every change by a reader carries the epoch of the state it was read from:
// a reset (the stream was deleted and created again) starts a new epoch, and
// readers of an older one can no longer change anything.
type Positions struct {
	mu    sync.Mutex
	state checkpoint.Stream
	dirty bool
	// endsSaved holds the shards whose end is durable: only those let
	// their children be read (an end only in memory could be lost by a
	// crash, and the parent's tail then read again after its children).
	endsSaved map[string]bool
	epoch     int
	// reset is closed by the next Reset (made when first asked for).
	reset chan struct{}
}

// NewPositions returns positions holding st.
func NewPositions(st checkpoint.Stream) *Positions {
	p := &Positions{}
	p.Replace(st)
	return p
}

// Replace takes st as the whole state: every end in it is durable.
func (p *Positions) Replace(st checkpoint.Stream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = st
	if p.state.Shards == nil {
		p.state.Shards = map[string]checkpoint.Checkpoint{}
	}
	p.endsSaved = map[string]bool{}
	for id, cp := range p.state.Shards {
		if cp.Ended {
			p.endsSaved[id] = true
		}
	}
}

// Epoch returns the epoch of the state.
func (p *Positions) Epoch() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// Of returns the checkpoint of a shard, and whether it has one.
func (p *Positions) Of(shardID string) (checkpoint.Checkpoint, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp, ok := p.state.Shards[shardID]
	return cp, ok
}

// Len returns the number of shards with a checkpoint.
func (p *Positions) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.state.Shards)
}

// EndSaved reports whether a shard's end is durable.
func (p *Positions) EndSaved(shardID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.endsSaved[shardID]
}

// Pin gives every shard of shards without a checkpoint one that starts at
// start, and returns those it pinned.
func (p *Positions) Pin(shards []Shard, start checkpoint.Start) (pinned []Shard) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sh := range shards {
		if _, ok := p.state.Shards[sh.ID]; !ok {
			p.state.Shards[sh.ID] = checkpoint.Checkpoint{Start: start, ShardStart: sh.StartSeq}
			pinned = append(pinned, sh)
		}
	}
	if len(pinned) > 0 {
		p.dirty = true
	}
	return pinned
}

// Reused returns a shard of listed whose id has a checkpoint of a shard that
// started at another sequence number: the stream was created again.
func (p *Positions) Reused(listed map[string]Shard) (id, now, was string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cp := range p.state.Shards {
		if sh, ok := listed[id]; ok && cp.ShardStart != "" && sh.StartSeq != "" && cp.ShardStart != sh.StartSeq {
			return id, sh.StartSeq, cp.ShardStart, true
		}
	}
	return "", "", "", false
}

// Prune brings the checkpoints in line with a listing: a listed shard gets
// its starting sequence number if its checkpoint lacks it, and the
// checkpoint of a shard not listed (gone past the retention period) is
// dropped. It returns the dropped shards, split by whether they had been
// read to their end.
func (p *Positions) Prune(listed map[string]Shard) (unfinished, finished []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cp := range p.state.Shards {
		if sh, ok := listed[id]; ok {
			if cp.ShardStart == "" && sh.StartSeq != "" {
				cp.ShardStart = sh.StartSeq
				p.state.Shards[id] = cp
				p.dirty = true
			}
			continue
		}
		if cp.Ended {
			finished = append(finished, id)
		} else {
			unfinished = append(unfinished, id)
		}
		delete(p.state.Shards, id)
		delete(p.endsSaved, id)
		p.dirty = true
	}
	return unfinished, finished
}

// Reset drops every checkpoint and starts a new epoch: the stream is a new
// one, created at created, under an old name.
func (p *Positions) Reset(created time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Shards = map[string]checkpoint.Checkpoint{}
	p.state.Created = created
	p.endsSaved = map[string]bool{}
	p.epoch++
	p.dirty = true
	if p.reset != nil {
		close(p.reset)
		p.reset = nil
	}
}

// ResetAfter returns a channel closed once the state is of a later epoch
// than epoch (at once if it is already).
func (p *Positions) ResetAfter(epoch int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch != epoch {
		done := make(chan struct{})
		close(done)
		return done
	}
	if p.reset == nil {
		p.reset = make(chan struct{})
	}
	return p.reset
}

// SetPosition records a new acknowledged position of a shard. A reader of
// an older epoch, or of a shard forgotten since, changes nothing; a
// position never moves back.
func (p *Positions) SetPosition(shardID string, pos checkpoint.Position, epoch int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp, ok := p.state.Shards[shardID]
	if !ok || epoch != p.epoch || (cp.Position != nil && !cp.Position.Less(pos)) {
		return
	}
	cp.Position = &pos
	p.state.Shards[shardID] = cp
	p.dirty = true
}

// SetEnded records that a shard was read to its end (after last, when
// set); it reports whether it did (a reader of an older epoch does not).
// The end counts for the children once it is saved (see saved).
func (p *Positions) SetEnded(shardID string, last *checkpoint.Position, epoch int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp, ok := p.state.Shards[shardID]
	if !ok || epoch != p.epoch {
		return false
	}
	if last != nil {
		cp.Position = last
	}
	cp.Ended = true
	p.state.Shards[shardID] = cp
	p.dirty = true
	return true
}

// Set records a shard's checkpoint as the store has it now (another
// instance's, or a lease just taken). An end in it is durable.
func (p *Positions) Set(shardID string, cp checkpoint.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(shardID, cp)
}

// SetIn is Set for what was stored under epoch: a write of a stream
// deleted and created again since (answered after the reset) changes
// nothing of the new stream's positions. It reports whether it set.
func (p *Positions) SetIn(epoch int, shardID string, cp checkpoint.Checkpoint) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		return false
	}
	p.setLocked(shardID, cp)
	return true
}

// setLocked is Set with p.mu held.
func (p *Positions) setLocked(shardID string, cp checkpoint.Checkpoint) {
	p.state.Shards[shardID] = cp
	if cp.Ended {
		p.endsSaved[shardID] = true
	} else {
		delete(p.endsSaved, shardID)
	}
}

// snapshot returns the state to save, if anything changed since the last
// snapshot, with its epoch; the state counts as saved until failed.
func (p *Positions) snapshot() (checkpoint.Stream, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dirty {
		return checkpoint.Stream{}, 0, false
	}
	snap := p.state
	snap.Shards = maps.Clone(p.state.Shards)
	p.dirty = false
	return snap, p.epoch, true
}

// failed records that saving a snapshot failed: the next commit saves again.
func (p *Positions) failed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dirty = true
}

// saved records that a snapshot of epoch is durable: its ends count.
func (p *Positions) saved(snap checkpoint.Stream, epoch int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		return
	}
	for id, cp := range snap.Shards {
		if cp.Ended {
			p.endsSaved[id] = true
		}
	}
}

// Learn takes in a known shard's checkpoint as another instance stored it;
// one of a shard of another stream under the same id (deleted and created
// again, by one side or the other) is left to discovery.
func (p *Positions) Learn(shardID string, cp checkpoint.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	known, ok := p.state.Shards[shardID]
	if !ok || (known.ShardStart != "" && cp.ShardStart != "" && known.ShardStart != cp.ShardStart) {
		return
	}
	p.setLocked(shardID, cp)
}

// Adopt takes in the checkpoints of shards it does not know yet: another
// instance pinned them.
func (p *Positions) Adopt(shards map[string]checkpoint.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cp := range shards {
		if _, known := p.state.Shards[id]; known {
			continue
		}
		p.state.Shards[id] = cp
		if cp.Ended {
			p.endsSaved[id] = true
		}
	}
}

// Unended is the number of shards not read to their end.
func (p *Positions) Unended() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, cp := range p.state.Shards {
		if !cp.Ended {
			n++
		}
	}
	return n
}

// Contradicts reports a stored checkpoint that the listing of its shard
// proves wrong: an end stored for a shard the service lists as open. Taken
// as it is, the shard would never be read again. (A position outside the
// shard's range is the reader's to refuse: see outOfRange in the input.)
func Contradicts(sh Shard, cp checkpoint.Checkpoint) error {
	if !sh.Listed || cp.Broken != nil {
		return nil
	}
	if cp.Ended && sh.EndSeq == "" {
		return fmt.Errorf("shard %s is stored as read to its end (SHARD_END), but the service lists it open (no ending sequence number)", sh.ID)
	}
	return nil
}

// OutsideShard reports a sequence number outside the range of the listed
// shard sh: below its starting sequence number, or above the ending one of
// a closed shard (KnownEnd). An open shard's upper bound is unknown: nothing
// above its start is refused here.
func OutsideShard(sh Shard, seq string) error {
	if !sh.Listed || !shard.ValidSequence(seq) || !shard.ValidSequence(sh.StartSeq) {
		return nil
	}
	end := "now (open)"
	if sh.EndSeq != "" {
		end = sh.EndSeq
	}
	if shard.CompareSequence(seq, sh.StartSeq) < 0 || (KnownEnd(sh.StartSeq, sh.EndSeq) && shard.CompareSequence(seq, sh.EndSeq) > 0) {
		return fmt.Errorf("sequence number %s is not a position in shard %s, which holds %s to %s", seq, sh.ID, sh.StartSeq, end)
	}
	return nil
}

// KnownEnd reports whether a listed ending sequence number bounds the
// shard's positions: kinesis-local, for one, lists 9223372036854775807 as
// the end of every closed shard, below its starting sequence number.
func KnownEnd(start, end string) bool {
	return shard.ValidSequence(end) && (!shard.ValidSequence(start) || shard.CompareSequence(end, start) >= 0)
}

// Contradicted marks, with the reason and the fix, the checkpoints of listed
// shards that the listing proves wrong (Contradicts), so that no reader
// starts from them; it returns those newly marked, by shard. fix says how
// to set a shard again, given its id.
func (p *Positions) Contradicted(listed map[string]Shard, fix func(shardID string) string) map[string]checkpoint.Checkpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]checkpoint.Checkpoint{}
	for id, cp := range p.state.Shards {
		sh, ok := listed[id]
		if !ok {
			continue
		}
		if err := Contradicts(sh, cp); err != nil {
			cp.Broken = fmt.Errorf("%w: the shard is not read until its checkpoint is set again: %s", err, fix(id))
			p.state.Shards[id] = cp
			delete(p.endsSaved, id)
			out[id] = cp
		}
	}
	return out
}

// Broken is the number of shards whose checkpoint is broken.
func (p *Positions) Broken() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, cp := range p.state.Shards {
		if cp.Broken != nil {
			n++
		}
	}
	return n
}
