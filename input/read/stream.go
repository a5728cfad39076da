package read

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Stream reads one stream: it discovers its shards, decides which may
// be read (every parent read to its end first) and runs one shardReader per
// readable shard. The stream's checkpoints are its positions.
type Stream struct {
	env *Env
	// conf is the stream as the component found it; the run loop changes
	// conf.Created when the stream was deleted and created again.
	conf StreamConfig

	// events from shard readers to the run loop.
	events chan shardEvent

	// pos holds the stream's checkpoints, coord decides what is read and
	// stores them; set by Load.
	pos   *coord.Positions
	coord coord.Coordinator

	// loop is the state only the run loop touches.
	loop runState

	// lag is each reading shard's millis behind latest, for the stream's
	// gauge; shard readers set it.
	lag lag

	// outOfRangeWarned holds the shards whose aggregates were found to hold
	// user records of another shard's hash key range: said once per shard.
	outOfRangeWarned sync.Map

	// health tells whether the stream can be read (see health.go).
	health streamHealth

	// placement is how the stream places records (see placement.go).
	placement placement
}

// runState is what the run loop of a stream owns.
type runState struct {
	shards  map[string]shardInfo // every shard known, from ListShards or ChildShards
	running map[string]context.CancelCauseFunc
	// firstPin is set while no shard of the stream has ever been pinned:
	// the first pin applies firstStart, later ones start new shards at
	// their beginning.
	firstPin   bool
	firstStart checkpoint.Start
	// unpinned is set while pinned starts are not yet saved: no shard is
	// read until they are, or a crash could re-pin latest later and skip what
	// arrived in between.
	unpinned bool
	// rediscover asks the run loop for a discovery at once: a child was
	// learnt whose other parent is not known yet.
	rediscover bool
	// listingWarned is the last warning about a listing that cannot be read
	// (no shards, parents in a cycle): said again only when it changes.
	listingWarned string
}

// lag is how far behind the tip of its shard each reader of a stream is.
type lag struct {
	mu     sync.Mutex
	behind map[string]int64
}

// setBehind records how far a shard's reader is behind the tip of its
// shard (ms < 0: the shard is finished), and sets the shard's gauge and the
// stream's, the most of its shards.
func (s *Stream) setBehind(shardID string, ms int64) {
	s.lag.mu.Lock()
	defer s.lag.mu.Unlock()
	if s.lag.behind == nil {
		s.lag.behind = map[string]int64{}
	}
	if ms < 0 {
		delete(s.lag.behind, shardID)
		ms = 0
	} else {
		s.lag.behind[shardID] = ms
	}
	s.env.Metrics.millisBehind.Set(ms, s.conf.Name, shardID)
	var most int64
	for _, v := range s.lag.behind {
		most = max(most, v)
	}
	s.env.Metrics.streamBehind.Set(most, s.conf.Name)
}

// zeroShardGauges sets the gauges of a shard this instance no longer reads
// (finished, or its lease gone) to zero: Benthos' metrics API cannot remove
// a series, and no dashboard should show lag of a shard read elsewhere.
func (s *Stream) zeroShardGauges(shardID string) {
	s.setBehind(shardID, -1)
	s.env.Metrics.pastCheckpoint.Set(0, s.conf.Name, shardID)
	s.env.Metrics.unacknowledged.Set(0, s.conf.Name, shardID)
}

// warnOutOfRange reports whether the shard's first user record outside its
// hash key range is being seen now.
func (s *Stream) warnOutOfRange(shardID string) bool {
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

// StreamConfig is what the component found of a stream to read.
type StreamConfig struct {
	Name, ARN string
	// Created is the stream's creation time; zero when not described
	// (registration none).
	Created time.Time
	// FirstSeen is when the input first saw the stream: start_from latest
	// is pinned to it. Zero: when Load is called.
	FirstSeen time.Time
	// Client lists the stream's shards.
	Client awsclient.ListShardsAPI
	// Publisher reads a shard's records: polling or fan-out.
	Publisher Publisher
	// Describe describes the stream again, for the creation time of a
	// stream found deleted and created again and for how it places
	// records; nil with registration none.
	Describe func(context.Context) (awsclient.Stream, error)
	// AutoPlacement: the stream placed records itself when described
	// (see placement.go); false with registration none, which describes
	// nothing.
	AutoPlacement bool
}

// NewStream returns the reader of one stream; Load, then Run, read it.
func NewStream(env *Env, c StreamConfig) *Stream {
	return &Stream{env: env, conf: c}
}

// Name is the stream's name.
func (s *Stream) Name() string { return s.conf.Name }

// ARN is the stream's ARN.
func (s *Stream) ARN() string { return s.conf.ARN }

// Commit stores what was acknowledged of the stream (and with a lease
// table renews its leases).
func (s *Stream) Commit(ctx context.Context) error { return s.coord.Commit(ctx) }

// Release commits and gives up the stream's leases, at a clean close.
func (s *Stream) Release(ctx context.Context) error { return s.coord.Release(ctx) }

// Committed tells the stream's health how a periodic commit went.
func (s *Stream) Committed(now time.Time, err error) { s.health.committed(now, err) }

// Unreadable says why the stream cannot be read at now, or "".
func (s *Stream) Unreadable(now time.Time) string { return s.health.unreadable(s.conf.Name, now) }

// Load reads the stored checkpoints through the input's coordination.
func (s *Stream) Load(ctx context.Context) error {
	if s.conf.FirstSeen.IsZero() {
		s.conf.FirstSeen = time.Now()
	}
	s.pos = coord.NewPositions(checkpoint.Stream{})
	s.coord = s.env.Coord.Stream(coord.Stream{
		Name: s.conf.Name, ARN: s.conf.ARN, Created: s.conf.Created,
		StartFor: s.firstStartFor, RestartsFrom: s.restartsFrom(),
		CommandFlags: s.env.Store.StreamFlags(s.conf.ARN),
		Log:          s.env.Log, Metrics: s.env.Metrics.Coord,
	}, s.pos)
	first, err := s.coord.Load(ctx)
	if err != nil {
		return err
	}
	s.loop.firstPin, s.loop.firstStart = first.Due, first.Start
	s.loaded(first)
	s.placement.describedAt = time.Now()
	s.notePlacement(s.conf.AutoPlacement, true)
	s.events = make(chan shardEvent)
	s.loop.shards = map[string]shardInfo{}
	s.loop.running = map[string]context.CancelCauseFunc{}
	return nil
}

// loaded says what the store held for the stream: a store found empty reads
// from start_from, which after a restart that opened another store than the
// one before (a relative directory from another working directory) skips
// what was written meanwhile, so it must not pass in silence.
func (s *Stream) loaded(first coord.FirstPin) {
	where := s.env.Store.Where
	n := s.pos.Len()
	if first.Due && n == 0 {
		from := first.Start.Kind
		if st, err := first.Start.ToShard(); err == nil {
			from = st.String()
		}
		hint := ""
		if s.env.Store.EmptyHint != "" {
			hint = "; " + s.env.Store.EmptyHint
		}
		s.env.Log.Infof("stream %s: no checkpoint in the %s: its shards are read from %s (start_from %s)%s", s.conf.Name, where, from, s.env.Start.Name, hint)
		return
	}
	s.env.Log.Infof("stream %s: checkpoints of %d shards found in the %s", s.conf.Name, n, where)
}

// firstStartFor is where the shards of the input's very first start are
// read from: start_from, latest as the time the input first saw the stream
// (for a stream found created again, its beginning: all of it was written
// since).
func (s *Stream) firstStartFor(recreated bool) checkpoint.Start {
	switch {
	case s.env.Start.Latest:
		if !recreated {
			return checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: s.conf.FirstSeen})
		}
	case !s.env.Start.At.IsZero():
		return checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: s.env.Start.At})
	}
	return checkpoint.Start{Kind: shard.TrimHorizon.String()}
}

// Run discovers shards and schedules their readers until ctx ends, then
// waits for the readers it started.
func (s *Stream) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()

	bo := backoff.Backoff{Initial: time.Second, Max: s.env.Limits.Discovery}
	timer := time.NewTimer(0)
	defer timer.Stop()
	// The coordinator's cycles start once the shards are known.
	cycle := time.NewTimer(time.Hour)
	cycle.Stop()
	defer cycle.Stop()
	cycling := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-cycle.C:
			cycle.Reset(s.coord.Cycle(ctx, s.readable))
		case <-s.coord.Changed():
		case <-timer.C:
			wait := s.env.Limits.Discovery
			err := s.discover(ctx)
			s.health.listed(time.Now(), err)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.env.Log.Errorf("stream %s: %v", s.conf.Name, err)
				wait = bo.Next()
			} else {
				bo.Reset()
				if !cycling {
					cycling = true
					cycle.Reset(s.coord.Cycle(ctx, s.readable))
				}
			}
			timer.Reset(wait)
		case ev := <-s.events:
			s.readerEnded(ctx, ev)
		}
		if s.loop.rediscover {
			s.loop.rediscover = false
			timer.Reset(0)
		}
		s.schedule(ctx, &wg)
		s.countHealth()
	}
}

// countHealth counts, for the stream's health, the shards it would read
// now, those it reads and those whose stored state cannot be read.
func (s *Stream) countHealth() {
	readable, broken := 0, map[string]bool{}
	for id, sh := range s.loop.shards {
		cp, ok := s.pos.Of(id)
		if !ok || cp.Ended || !s.parentsEnded(sh) {
			continue
		}
		readable++
		if cp.Broken != nil {
			broken[id] = true
		}
	}
	s.health.counted(readable, len(s.loop.running), broken)
}

// readable reports whether a known shard may be read as far as the stream
// can tell: every parent read to its end.
func (s *Stream) readable(shardID string) bool {
	sh, ok := s.loop.shards[shardID]
	return ok && s.parentsEnded(sh)
}

// readerEnded handles the end of a shard reader. A reader of the state
// before a reset (the stream was deleted and created again) ended a shard of
// the old stream: its children are none of the new stream's business.
func (s *Stream) readerEnded(ctx context.Context, ev shardEvent) {
	delete(s.loop.running, ev.shardID)
	if ev.ended && ev.epoch == s.pos.Epoch() {
		s.learnChildren(ctx, ev.children)
	}
}

// discover lists every shard of the stream, records the new ones, and
// forgets the ones gone past the retention period.
func (s *Stream) discover(ctx context.Context) error {
	listed, err := listShards(ctx, s.conf.Client, s.conf.ARN)
	if err != nil {
		return err
	}
	if len(listed) == 0 {
		// A stream has an open shard at all times: such an answer is
		// wrong, and taken as it is it would drop every checkpoint.
		return errors.New("ListShards lists no shards: nothing is read, and no checkpoint is dropped, until it lists some")
	}
	known := map[string]shardInfo{}
	for _, sh := range listed {
		known[sh.id] = sh
	}
	s.checkListing(known)
	s.describePlacement(ctx, time.Now())
	if s.reused(known) {
		if err := s.reset(ctx); err != nil {
			return err
		}
	}
	for id, sh := range s.loop.shards {
		if _, ok := known[id]; ok {
			continue
		}
		if !sh.listed {
			known[id] = sh // learnt from ChildShards, not listed yet: keep it
			continue
		}
		if cancel, ok := s.loop.running[id]; ok {
			// Listed before and not any more: it passed the retention period
			// while being read, and reading it again can only fail.
			s.env.Log.Warnf("stream %s: shard %s passed the retention period before it was read to its end: its unread records are gone", s.conf.Name, id)
			cancel(nil)
		}
	}
	for _, id := range s.coord.Prune(coordShards(known)) {
		if _, ok := s.loop.running[id]; ok {
			continue
		}
		if neverListed(id, listed) {
			s.env.Log.Warnf("stream %s: the store has a checkpoint of shard %s, which is not in the stream (whose shard ids go up to %s): the checkpoint is ignored", s.conf.Name, id, maxShardID(listed))
			continue
		}
		s.env.Log.Warnf("stream %s: shard %s is no longer listed (older than the retention period) and was not read to its end: records of it not read before are gone", s.conf.Name, id)
	}
	s.loop.shards = known
	return s.pin(ctx, listed)
}

// checkListing warns about a listing that leaves shards unread for good:
// shards whose parents lead back to themselves (an answer the service should
// never give; such shards wait for a parent's end that never comes).
func (s *Stream) checkListing(known map[string]shardInfo) {
	var msg string
	if cyc := parentCycle(known); len(cyc) > 0 {
		msg = fmt.Sprintf("stream %s: ListShards lists shards whose parents lead back to themselves (%s): they are never read, as each waits for a parent's end", s.conf.Name, strings.Join(cyc, " -> "))
	}
	if msg != "" && msg != s.loop.listingWarned {
		s.env.Log.Errorf("%s", msg)
	}
	s.loop.listingWarned = msg
}

// parentCycle returns the shard ids of a cycle of parents among shards,
// ending with the first again, or nil.
func parentCycle(shards map[string]shardInfo) []string {
	ids := make([]string, 0, len(shards))
	for id := range shards {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	done := map[string]bool{}
	for _, id := range ids {
		var path []string
		on := map[string]int{}
		var walk func(id string) []string
		walk = func(id string) []string {
			if i, ok := on[id]; ok {
				return append(slices.Clone(path[i:]), id)
			}
			sh, ok := shards[id]
			if !ok || done[id] {
				return nil
			}
			on[id] = len(path)
			path = append(path, id)
			for _, p := range sh.parents {
				if c := walk(p); c != nil {
					return c
				}
			}
			path = path[:len(path)-1]
			delete(on, id)
			done[id] = true
			return nil
		}
		if c := walk(id); c != nil {
			return c
		}
	}
	return nil
}

// neverListed reports whether a shard id absent from a listing can never
// have been a shard of the stream: Kinesis numbers a stream's shards
// upwards, so an id above every listed one (or not of that form) is not of
// this stream, while one below may have passed the retention period.
func neverListed(id string, listed []shardInfo) bool {
	n, ok := shardNumber(id)
	if !ok {
		return true
	}
	for _, sh := range listed {
		if m, ok := shardNumber(sh.id); ok && m >= n {
			return false
		}
	}
	return true
}

// maxShardID returns the highest shard id of a listing.
func maxShardID(listed []shardInfo) string {
	most, id := int64(-1), "none"
	for _, sh := range listed {
		if n, ok := shardNumber(sh.id); ok && n > most {
			most, id = n, sh.id
		}
	}
	return id
}

// shardNumber returns the number of a shard id of Kinesis' form
// shardId-000000000042.
func shardNumber(id string) (int64, bool) {
	digits, ok := strings.CutPrefix(id, "shardId-")
	if !ok || digits == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n >= 0
}

// reused reports whether the listed shards are of a stream created again
// since the checkpoints were written: a shard id reused with another starting
// sequence number. (It is the only sign with registration none, which never
// describes the stream.)
func (s *Stream) reused(listed map[string]shardInfo) bool {
	id, now, was, ok := s.pos.Reused(coordShards(listed))
	if ok {
		s.env.Log.Warnf("stream %s: shard %s starts at sequence number %s, but its checkpoint is of a shard that started at %s: the stream was deleted and created again, so the old checkpoints are dropped and %s",
			s.conf.Name, id, now, was, s.restartsFrom())
	}
	return ok
}

// restartsFrom says where a stream found created again is read from.
func (s *Stream) restartsFrom() string {
	if s.env.Start.Latest {
		return "the new stream is read from its beginning (all of it was written after the input first started on the name)"
	}
	return "the new stream is read from start_from"
}

// reset stops every reader and drops every checkpoint (and lease): the
// stream is a new one under an old name. Readers of the old one can no
// longer touch the state. The saved state takes the new stream's creation
// time, so that the next start keeps the new checkpoints instead of
// dropping them as a stream's of another creation time.
func (s *Stream) reset(ctx context.Context) error {
	created := time.Time{}
	if s.conf.Describe != nil {
		desc, err := s.conf.Describe(ctx)
		if err != nil {
			return fmt.Errorf("stream %s was deleted and created again; describing the new one: %w", s.conf.Name, err)
		}
		created = desc.Created
	}
	for _, cancel := range s.loop.running {
		cancel(nil)
	}
	// The checkpoints are forgotten even when the reset's write fails: the
	// stream is the new one from here on, and its first pin (which writes
	// the stream's item again) comes at the next discovery.
	err := s.coord.Reset(ctx, created)
	s.conf.Created = created
	s.loop.shards = map[string]shardInfo{}
	s.loop.firstPin, s.loop.firstStart = true, s.firstStartFor(true)
	s.loop.unpinned = true
	return err
}

// learnChildren records child shards learnt at the end of a parent, so that they are
// read without waiting for the next discovery. A child with a parent not known
// yet (a merge whose other parent appeared after the last discovery) asks for
// a discovery at once: until one lists it, the child waits.
func (s *Stream) learnChildren(ctx context.Context, children []shardInfo) {
	var learnt []shardInfo
	for _, c := range children {
		if _, ok := s.loop.shards[c.id]; !ok {
			s.loop.shards[c.id] = c
			learnt = append(learnt, c)
		}
		for _, p := range c.parents {
			if _, ok := s.loop.shards[p]; !ok {
				s.loop.rediscover = true
			}
		}
	}
	if err := s.pin(ctx, learnt); err != nil && ctx.Err() == nil {
		s.env.Log.Errorf("stream %s: %v", s.conf.Name, err)
	}
}

// pin decides and durably stores where each shard without a checkpoint
// starts, before any of them is read: the first start's (start_from, latest
// as the time the stream was first seen) on the stream's very first pin,
// the beginning of the shard for a shard created after that.
func (s *Stream) pin(ctx context.Context, shards []shardInfo) error {
	start := checkpoint.Start{Kind: shard.TrimHorizon.String()}
	if s.loop.firstPin {
		start = s.loop.firstStart
	}
	s.loop.unpinned = true
	if err := s.coord.Pin(ctx, coordShardList(shards), start, s.loop.firstPin); err != nil {
		return err
	}
	s.loop.unpinned = false
	s.loop.firstPin = false
	return nil
}

// schedule starts a reader for every shard that is not ended, not running,
// whose parents have all ended (or are gone), and that the coordinator
// grants now.
func (s *Stream) schedule(ctx context.Context, wg *sync.WaitGroup) {
	if ctx.Err() != nil || s.loop.unpinned {
		return
	}
	epoch := s.pos.Epoch()
	for id, sh := range s.loop.shards {
		if _, ok := s.loop.running[id]; ok {
			continue
		}
		if cp, ok := s.pos.Of(id); !ok || cp.Ended {
			continue
		}
		if !s.parentsEnded(sh) {
			continue
		}
		rctx, cancel := context.WithCancelCause(ctx)
		g, ok := s.coord.Acquire(id, cancel)
		if !ok {
			cancel(nil)
			continue
		}
		s.loop.running[id] = cancel
		r := newShardReader(s, sh, g, cancel)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel(nil)
			ev := r.run(rctx)
			ev.epoch = epoch
			// A reader of the shard starts again only once what this one
			// handed out is settled: a new one starts after the last
			// acknowledged record, and would read the rest again.
			g.Stopped(ctx, r.tracker.Settled)
			if !ev.ended {
				s.zeroShardGauges(id) // read again later, here or elsewhere
			}
			select {
			case s.events <- ev:
			case <-ctx.Done():
			}
		}()
	}
}

// parentsEnded reports whether every parent of sh has been read to its end
// and that end saved, or is gone past the retention period. A parent is known
// to be gone only when a listing that has sh lacks it; a parent of a child
// learnt from ChildShards and not listed yet is waited for.
func (s *Stream) parentsEnded(sh shardInfo) bool {
	for _, p := range sh.parents {
		if p == "" {
			continue
		}
		if _, known := s.loop.shards[p]; !known {
			if sh.listed {
				continue // gone past retention
			}
			return false
		}
		if !s.pos.EndSaved(p) {
			return false
		}
	}
	return true
}
