package input

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// streamReader reads one stream: it discovers its shards, decides which may
// be read (every parent read to its end first) and runs one shardReader per
// readable shard. The stream's checkpoints are its positions.
type streamReader struct {
	in      *kinesisInput
	name    string
	arn     string
	created time.Time
	client  *kinesis.Client
	pub     recordPublisher
	// deregister is the consumer ARN to deregister at a clean close
	// (efo.deregister_on_close), or empty.
	deregister string
	// seen is when the input first saw the stream (described it, or with
	// registration none started on it): start_from latest is pinned to it,
	// so records written while the first shard listing is retried are read.
	seen time.Time
	// describe describes the stream again, for the creation time of a stream
	// found deleted and created again; nil with registration none.
	describe func(context.Context) (awsclient.Stream, error)

	// events from shard readers to the run loop.
	events chan shardEvent

	// pos holds the stream's checkpoints; set by load.
	pos *positions

	// Owned by the run loop.
	shards  map[string]shardInfo // every shard known, from ListShards or ChildShards
	running map[string]context.CancelCauseFunc
	// firstPin is set while no shard of the stream has ever been pinned:
	// the first pin applies start_from, later ones start new shards at their
	// beginning.
	firstPin bool
	// recreated is set with firstPin when the checkpoints were of an earlier
	// stream of the same name: every record of the new stream was written
	// after the input first saw the name, so start_from latest reads it from
	// its beginning.
	recreated bool
	// unpinned is set while pinned starts are not yet saved: no shard is
	// read until they are, or a crash could re-pin latest later and skip what
	// arrived in between.
	unpinned bool
	// rediscover asks the run loop for a discovery at once: a child was
	// learnt whose other parent is not known yet.
	rediscover bool
	// pinStart, with a lease table, is where the shards of the first pin
	// start, as the stream's item says: every instance pins the same.
	pinStart *checkpoint.Start
	// pinWait, with a lease table, is until when another instance is
	// waited for to pin the stream's first shards (it wrote the stream's
	// item first): one instance pins them, the others read its items.
	pinWait time.Time
	// soon asks the run loop for a discovery shortly (another instance's
	// first pin is awaited).
	soon bool
	// wake asks the run loop to schedule again: a lease was renewed after a
	// lapse, or handed over (lease table only).
	wake chan struct{}
	// leasesStarted is set once the first lease cycle ran.
	leasesStarted bool

	// behind is each reading shard's millis behind latest, for the
	// stream's gauge.
	behindMu sync.Mutex
	behind   map[string]int64

	// outOfRangeWarned holds the shards whose aggregates were found to hold
	// user records of another shard's hash key range: said once per shard.
	outOfRangeWarned sync.Map
}

// setBehind records how far a shard's reader is behind the tip of its
// shard (ms < 0: the shard is finished), and sets the shard's gauge and the
// stream's, the most of its shards.
func (s *streamReader) setBehind(shardID string, ms int64) {
	s.behindMu.Lock()
	defer s.behindMu.Unlock()
	if s.behind == nil {
		s.behind = map[string]int64{}
	}
	if ms < 0 {
		delete(s.behind, shardID)
		ms = 0
	} else {
		s.behind[shardID] = ms
	}
	s.in.metrics.millisBehind.Set(ms, s.name, shardID)
	var most int64
	for _, v := range s.behind {
		most = max(most, v)
	}
	s.in.metrics.streamBehind.Set(most, s.name)
}

// zeroShardGauges sets the gauges of a shard this instance no longer reads
// (finished, or its lease gone) to zero: Benthos' metrics API cannot remove
// a series, and no dashboard should show lag of a shard read elsewhere.
func (s *streamReader) zeroShardGauges(shardID string) {
	s.setBehind(shardID, -1)
	s.in.metrics.pastCheckpoint.Set(0, s.name, shardID)
	s.in.metrics.unacknowledged.Set(0, s.name, shardID)
}

// warnOutOfRange reports whether the shard's first user record outside its
// hash key range is being seen now.
func (s *streamReader) warnOutOfRange(shardID string) bool {
	_, seen := s.outOfRangeWarned.LoadOrStore(shardID, true)
	return !seen
}

// shardEvent reports the end of a shard reader.
type shardEvent struct {
	shardID  string
	epoch    int         // of the state the reader read for
	ended    bool        // the shard was read to its end and that end committed
	children []shardInfo // from the end of the shard, possibly empty
}

// load reads the stored checkpoints. A stream that was deleted and created
// again since they were written starts afresh, loudly.
func (s *streamReader) load(ctx context.Context) error {
	if s.in.table != nil {
		return s.loadLeases(ctx)
	}
	st, err := s.in.store.Load(ctx, s.arn)
	if err != nil {
		return fmt.Errorf("loading checkpoints of stream %s: %w", s.name, err)
	}
	recreated := false
	if !st.Created.IsZero() && !s.created.IsZero() && !st.Created.Equal(s.created) {
		s.in.log.Warnf("stream %s was created at %v, but its checkpoints are of a stream of that name created at %v: it was deleted and created again, so the old checkpoints are dropped and %s",
			s.name, s.created.UTC(), st.Created.UTC(), s.restartsFrom())
		st.Shards = map[string]checkpoint.Checkpoint{}
		recreated = true
	}
	for id, cp := range st.Shards {
		if _, err := cp.Resume(); err != nil {
			return fmt.Errorf("checkpoint of stream %s shard %s: %w: restore the checkpoint file, or delete it to start again from start_from", s.name, id, err)
		}
	}
	st.ARN = s.arn
	st.Created = s.created
	s.pos = newPositions(s.name, s.in.store, s.in.metrics, st)
	s.firstPin = len(st.Shards) == 0
	s.recreated = recreated
	s.prepareRun()
	return nil
}

// prepareRun sets up what the run loop owns.
func (s *streamReader) prepareRun() {
	s.pos.log = s.in.log
	if s.seen.IsZero() {
		s.seen = time.Now()
	}
	s.events = make(chan shardEvent)
	s.wake = make(chan struct{}, 1)
	s.shards = map[string]shardInfo{}
	s.running = map[string]context.CancelCauseFunc{}
}

// run discovers shards and schedules their readers until ctx ends, then waits
// for the readers it started.
func (s *streamReader) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()

	bo := backoff.Backoff{Initial: time.Second, Max: s.in.conf.DiscoveryInterval}
	timer := time.NewTimer(0)
	defer timer.Stop()
	// With a lease table, leases are taken every third of a lease period,
	// after the first discovery.
	var leaseC <-chan time.Time
	var leaseT *time.Timer
	if s.pos.leases != nil {
		leaseT = time.NewTimer(s.pos.leases.period / 3)
		defer leaseT.Stop()
		leaseC = leaseT.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-leaseC:
			if err := s.leaseCycle(ctx); err != nil && ctx.Err() == nil {
				s.in.log.Errorf("stream %s: %v", s.name, err)
			}
			leaseT.Reset(s.pos.leases.nextCycle(time.Now()))
		case <-s.wake:
		case <-timer.C:
			wait := s.in.conf.DiscoveryInterval
			if err := s.discover(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.in.log.Errorf("stream %s: %v", s.name, err)
				wait = bo.Next()
			} else {
				bo.Reset()
				if s.pos.leases != nil && !s.leasesStarted {
					// The first leases are taken as soon as the shards are
					// known, not a third of a lease period later.
					s.leasesStarted = true
					if err := s.leaseCycle(ctx); err != nil && ctx.Err() == nil {
						s.in.log.Errorf("stream %s: %v", s.name, err)
					}
				}
			}
			timer.Reset(wait)
		case ev := <-s.events:
			s.readerEnded(ctx, ev)
		}
		if s.rediscover {
			s.rediscover = false
			timer.Reset(0)
		}
		if s.soon {
			s.soon = false
			timer.Reset(200 * time.Millisecond)
		}
		s.schedule(ctx, &wg)
	}
}

// readerEnded handles the end of a shard reader. A reader of the state
// before a reset (the stream was deleted and created again) ended a shard of
// the old stream: its children are none of the new stream's business.
func (s *streamReader) readerEnded(ctx context.Context, ev shardEvent) {
	delete(s.running, ev.shardID)
	if ev.ended && ev.epoch == s.pos.current() {
		s.adopt(ctx, ev.children)
	}
}

// discover lists every shard of the stream, records the new ones, and
// forgets the ones gone past the retention period.
func (s *streamReader) discover(ctx context.Context) error {
	listed, err := listShards(ctx, s.client, s.arn)
	if err != nil {
		return err
	}
	known := map[string]shardInfo{}
	for _, sh := range listed {
		known[sh.id] = sh
	}
	if s.reused(known) {
		if err := s.reset(ctx); err != nil {
			return err
		}
	}
	for id, sh := range s.shards {
		if _, ok := known[id]; ok {
			continue
		}
		if !sh.listed {
			known[id] = sh // learnt from ChildShards, not listed yet: keep it
			continue
		}
		if cancel, ok := s.running[id]; ok {
			// Listed before and not any more: it passed the retention period
			// while being read, and reading it again can only fail.
			s.in.log.Warnf("stream %s: shard %s passed the retention period before it was read to its end: its unread records are gone", s.name, id)
			cancel(nil)
		}
	}
	for _, id := range s.pos.prune(known) {
		if _, ok := s.running[id]; !ok {
			s.in.log.Warnf("stream %s: shard %s is no longer listed (older than the retention period) and was not read to its end: records of it not read before are gone", s.name, id)
		}
	}
	s.shards = known
	if s.pinWait.After(time.Now()) {
		if waiting, err := s.awaitFirstPin(ctx); waiting || err != nil {
			return err
		}
	}
	return s.pin(ctx, listed)
}

// reused reports whether the listed shards are of a stream created again
// since the checkpoints were written: a shard id reused with another starting
// sequence number. (It is the only sign with registration none, which never
// describes the stream.)
func (s *streamReader) reused(listed map[string]shardInfo) bool {
	id, now, was, ok := s.pos.reused(listed)
	if ok {
		s.in.log.Warnf("stream %s: shard %s starts at sequence number %s, but its checkpoint is of a shard that started at %s: the stream was deleted and created again, so the old checkpoints are dropped and %s",
			s.name, id, now, was, s.restartsFrom())
	}
	return ok
}

// restartsFrom says where a stream found created again is read from.
func (s *streamReader) restartsFrom() string {
	if s.in.conf.StartFrom == startLatest {
		return "the new stream is read from its beginning (all of it was written after the input first started on the name)"
	}
	return "the new stream is read from start_from"
}

// reset drops every checkpoint and stops every reader: the stream is a new
// one under an old name. Readers of the old one can no longer touch the
// state. The saved state takes the new stream's creation time, so that the
// next start keeps the new checkpoints instead of dropping them as a
// stream's of another creation time.
func (s *streamReader) reset(ctx context.Context) error {
	created := time.Time{}
	if s.describe != nil {
		desc, err := s.describe(ctx)
		if err != nil {
			return fmt.Errorf("stream %s was deleted and created again; describing the new one: %w", s.name, err)
		}
		created = desc.Created
	}
	for _, cancel := range s.running {
		cancel(nil)
	}
	s.pos.reset(created)
	s.created = created
	s.shards = map[string]shardInfo{}
	s.firstPin = true
	s.recreated = true
	return nil
}

// adopt records child shards learnt at the end of a parent, so that they are
// read without waiting for the next discovery. A child with a parent not known
// yet (a merge whose other parent appeared after the last discovery) asks for
// a discovery at once: until one lists it, the child waits.
func (s *streamReader) adopt(ctx context.Context, children []shardInfo) {
	var learnt []shardInfo
	for _, c := range children {
		if _, ok := s.shards[c.id]; !ok {
			s.shards[c.id] = c
			learnt = append(learnt, c)
		}
		for _, p := range c.parents {
			if _, ok := s.shards[p]; !ok {
				s.rediscover = true
			}
		}
	}
	if err := s.pin(ctx, learnt); err != nil && ctx.Err() == nil {
		s.in.log.Errorf("stream %s: %v", s.name, err)
	}
}

// pin decides and durably stores where each shard without a checkpoint
// starts, before any of them is read: start_from on the input's very first
// start (latest as the current time), the beginning of the shard for a shard
// created after that.
func (s *streamReader) pin(ctx context.Context, shards []shardInfo) error {
	start := checkpoint.Start{Kind: shard.TrimHorizon.String()}
	if s.firstPin && s.pinStart != nil {
		start = *s.pinStart
	} else if s.firstPin {
		switch s.in.conf.StartFrom {
		case startLatest:
			if !s.recreated {
				start = checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: s.seen})
			}
		case startAtTimestamp:
			start = checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: s.in.conf.StartTimestamp})
		}
	}
	if s.pos.pin(shards, start) {
		s.unpinned = true
	}
	if !s.unpinned {
		return nil
	}
	if s.pos.leases != nil {
		// Items of new shards are created apart from the renewals, which a
		// large first pin must not delay.
		if err := s.pos.storePinned(ctx); err != nil {
			return err
		}
	} else if err := s.pos.commit(ctx); err != nil {
		return err
	}
	if s.firstPin && s.pinStart != nil {
		if err := s.pinned(ctx); err != nil {
			return err
		}
	}
	s.unpinned = false
	s.firstPin = false
	s.recreated = false
	return nil
}

// schedule starts a reader for every shard that is not ended, not running,
// and whose parents have all ended (or are gone).
func (s *streamReader) schedule(ctx context.Context, wg *sync.WaitGroup) {
	if ctx.Err() != nil || s.unpinned {
		return
	}
	epoch := s.pos.current()
	l := s.pos.leases
	now := time.Now()
	for id, sh := range s.shards {
		if _, ok := s.running[id]; ok {
			continue
		}
		if l != nil && !l.holds(id, now) {
			continue
		}
		cp, ok := s.pos.of(id)
		if !ok || cp.Ended {
			continue
		}
		if !s.parentsEnded(sh) {
			continue
		}
		rctx, cancel := context.WithCancelCause(ctx)
		var gen int64
		if l != nil {
			if gen = l.startReading(id, cancel); gen == 0 {
				cancel(nil)
				continue
			}
		}
		s.running[id] = cancel
		r := newShardReader(s, sh, cp, epoch)
		r.gen = gen
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel(nil)
			ev := r.run(rctx)
			if l != nil && l.readerEnded(id, gen) {
				s.handOver(ctx, r)
			}
			if l != nil && !l.holds(id, time.Now()) {
				s.zeroShardGauges(id) // read elsewhere now
			}
			select {
			case s.events <- ev:
			case <-ctx.Done():
			}
		}()
	}
	if l != nil {
		s.in.metrics.ownedShards.Set(int64(l.count()), s.name)
	} else {
		s.in.metrics.ownedShards.Set(int64(len(s.running)), s.name)
	}
}

// parentsEnded reports whether every parent of sh has been read to its end
// and that end saved, or is gone past the retention period. A parent is known
// to be gone only when a listing that has sh lacks it; a parent of a child
// learnt from ChildShards and not listed yet is waited for.
func (s *streamReader) parentsEnded(sh shardInfo) bool {
	for _, p := range sh.parents {
		if p == "" {
			continue
		}
		if _, known := s.shards[p]; !known {
			if sh.listed {
				continue // gone past retention
			}
			return false
		}
		if !s.pos.endSaved(p) {
			return false
		}
	}
	return true
}
