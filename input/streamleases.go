package input

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// loadLeases is load with a lease table: this instance announces itself,
// reads every item of the stream, and agrees with the other instances on
// where the first shards start (the stream's item, written by whichever
// instance came first). A stream deleted and created again since the item
// was written starts afresh, loudly.
func (s *streamReader) loadLeases(ctx context.Context) error {
	t := s.in.table
	l := newLeases(t, s.arn, s.in.conf.Leases)
	if err := t.Heartbeat(ctx, s.arn, l.me); err != nil {
		return err
	}
	l.beat = time.Now()
	if s.seen.IsZero() {
		s.seen = time.Now()
	}
	want := lease.Stream{ARN: s.arn, Created: s.created, Start: s.firstStart(false)}
	item, created, err := t.PutStream(ctx, want)
	if err != nil {
		return err
	}
	if !created && !item.Pinned {
		// Another instance started first and is pinning the first shards:
		// read its items rather than race it for each (for a while: it may
		// have died meanwhile).
		s.pinWait = time.Now().Add(s.in.conf.Leases.LeasePeriod)
	}
	recreated := false
	if !item.Created.IsZero() && !s.created.IsZero() && !item.Created.Equal(s.created) {
		s.in.log.Warnf("stream %s was created at %v, but the lease table %s describes a stream of that name created at %v: it was deleted and created again, so the old checkpoints are dropped and %s",
			s.name, s.created.UTC(), t.Name(), item.Created.UTC(), s.restartsFrom())
		recreated = true
		item = lease.Stream{ARN: s.arn, Created: s.created, Start: s.firstStart(true)}
		if err := t.ReplaceStream(ctx, item); err != nil {
			return err
		}
	}
	sc, err := t.Scan(ctx, s.arn)
	if err != nil {
		return err
	}
	st := checkpoint.Stream{ARN: s.arn, Created: s.created, Shards: map[string]checkpoint.Checkpoint{}}
	if !recreated {
		for _, it := range sc.Shards {
			st.Shards[it.ShardID] = it.Checkpoint
		}
	}
	s.pos = newPositions(s.name, nil, s.in.metrics, st)
	s.pos.leases = l
	s.pos.unstored = map[string][]string{}
	l.observe(sc, time.Now())
	start := item.Start
	s.pinStart = &start
	s.firstPin = !item.Pinned
	s.recreated = recreated
	s.prepareRun()
	return nil
}

// firstStart is where the shards of the input's very first start are read
// from: start_from, latest as the time the input first saw the stream (for a
// stream found created again, its beginning: all of it was written since).
func (s *streamReader) firstStart(recreated bool) checkpoint.Start {
	switch s.in.conf.StartFrom {
	case startLatest:
		if !recreated {
			return checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: s.seen})
		}
	case startAtTimestamp:
		return checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: s.in.conf.StartTimestamp})
	}
	return checkpoint.Start{Kind: shard.TrimHorizon.String()}
}

// pinned marks the stream's item: the first shards' items hold their start,
// so shards found later start at their beginning.
func (s *streamReader) pinned(ctx context.Context) error {
	return s.in.table.ReplaceStream(ctx, lease.Stream{ARN: s.arn, Created: s.created, Start: *s.pinStart, Pinned: true})
}

// leaseCycle reads the stream's items and balances: it takes the leases
// handed to this instance and free or expired ones up to its share, asks
// live holders of more than their share for some, and starts handing over
// the leases others asked it for. Readers start at the next schedule.
func (s *streamReader) leaseCycle(ctx context.Context) error {
	l := s.pos.leases
	sc, err := l.table.Scan(ctx, s.arn)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, id := range l.observe(sc, now) {
		l.lose(id, errLeaseLost)
		s.in.metrics.leasesLost.Incr(1, s.name)
		s.in.log.Warnf("stream %s shard %s: its lease was taken by another instance: stopped reading it", s.name, id)
	}
	s.pos.observe(sc.Shards)

	var claims []claim
	items := map[string]lease.Shard{}
	for _, it := range sc.Shards {
		sh, ok := s.shards[it.ShardID]
		if !ok || it.Checkpoint.Ended || !s.parentsEnded(sh) || s.pos.isUnstored(it.ShardID) {
			continue
		}
		items[it.ShardID] = it
		asked := it.HandoffTo
		if at, ok := l.askedAt(it.ShardID); ok && asked == "" && it.Owner != l.me && now.Sub(at) < l.period {
			asked = l.me // asked, and the scan does not show it yet
		}
		claims = append(claims, claim{shard: it.ShardID, owner: it.Owner, expired: l.expired(it, now), asked: asked})
		if it.Owner == l.me && it.HandoffTo != "" && it.HandoffTo != l.me {
			s.pos.askedFor(it.ShardID, it.HandoffTo)
		}
	}
	l.mu.Lock()
	live := map[string]bool{}
	for id, ok := range l.workers {
		if ok {
			live[id] = true
		}
	}
	var adopt []lease.Shard
	for _, it := range items {
		if _, held := l.held[it.ShardID]; !held && it.Owner == l.me {
			adopt = append(adopt, it) // handed over to this instance
		}
	}
	l.mu.Unlock()

	take, ask := balance(l.me, claims, live, l.steals, func(c []claim) {
		rand.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	})
	for _, it := range adopt {
		if s.take(ctx, it) {
			s.in.metrics.leasesStolen.Incr(1, s.name)
		}
	}
	for _, c := range take {
		if s.take(ctx, items[c.shard]) {
			s.in.metrics.leasesTaken.Incr(1, s.name)
		}
	}
	for _, c := range ask {
		switch err := l.table.Ask(ctx, items[c.shard], l.me); {
		case err == nil:
			l.setAsked(c.shard, now)
			s.in.log.Debugf("stream %s shard %s: asked %s to hand its lease over", s.name, c.shard, c.owner)
		case err != lease.ErrLost && ctx.Err() == nil:
			s.in.log.Errorf("stream %s: %v", s.name, err)
		}
	}

	var oldest time.Duration
	l.mu.Lock()
	for _, h := range l.held {
		oldest = max(oldest, now.Sub(h.renewed))
	}
	l.mu.Unlock()
	s.in.metrics.sinceRenewal.Set(oldest.Milliseconds(), s.name)
	return nil
}

// take takes a lease as scanned; it reports whether it did. Another
// instance taking it first is contention, not an error.
func (s *streamReader) take(ctx context.Context, it lease.Shard) bool {
	l := s.pos.leases
	sent := time.Now()
	got, err := l.table.Take(ctx, it, l.me)
	if err == lease.ErrLost {
		s.in.log.Debugf("stream %s shard %s: another instance took the lease first", s.name, it.ShardID)
		return false
	}
	if err != nil {
		if ctx.Err() == nil {
			s.in.log.Errorf("stream %s: %v", s.name, err)
		}
		return false
	}
	from := "free"
	if it.Owner != "" && it.Owner != l.me {
		from = "expired, of " + it.Owner
	} else if it.Owner == l.me {
		from = "handed over"
	}
	s.in.log.Debugf("stream %s shard %s: took its lease (%s) at %s", s.name, it.ShardID, from, describeCheckpoint(got.Checkpoint))
	s.pos.took(got, sent)
	return true
}

func describeCheckpoint(cp checkpoint.Checkpoint) string {
	switch {
	case cp.Ended:
		return "its end"
	case cp.Position != nil:
		return "checkpoint " + cp.Position.String()
	}
	return fmt.Sprintf("its start (%s)", cp.Start.Kind)
}

// handOver completes the handoff of a lease whose reader stopped for it: it
// waits (a lease period at most) for the acknowledgements of what the reader
// handed out, then commits, which writes the last checkpoint and hands the
// lease over. Past the wait it hands over anyway: the new holder reads again
// what was not acknowledged, which is never a loss.
func (s *streamReader) handOver(ctx context.Context, r *shardReader) {
	l := s.pos.leases
	dctx, cancel := context.WithTimeout(ctx, l.period)
	err := r.tracker.Drained(dctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		s.in.log.Warnf("stream %s shard %s: handing its lease over before every record handed out was acknowledged (none within %v): the next holder reads those again", s.name, r.info.id, l.period)
	}
	s.pos.drained(r.info.id, r.gen)
	if err := s.pos.commit(ctx); err != nil && ctx.Err() == nil {
		s.in.log.Errorf("%v", err)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// awaitFirstPin is discovery's wait for the instance that pins the stream's
// first shards: it reports waiting while that instance is not done, and once
// it is, takes its items as this instance's state (the first pin is then
// done: shards without an item are new ones, read from their beginning).
func (s *streamReader) awaitFirstPin(ctx context.Context) (waiting bool, err error) {
	sc, err := s.in.table.Scan(ctx, s.arn)
	if err != nil {
		return false, err
	}
	if sc.Stream == nil || !sc.Stream.Pinned {
		s.soon = true
		return true, nil
	}
	s.pos.adopt(sc.Shards)
	s.pinWait = time.Time{}
	s.firstPin = false
	return false, nil
}
