package leasecoord

// The processes of the simulation: each runs a leaseCoordinator as the
// input does (a commit loop; a run loop that cycles, discovers and starts
// readers; readers that hand records out, have them acknowledged and
// stop), on its own simClock and simStore. What they do is recorded for
// the invariants (sim_test.go).

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
)

const simARN = "arn:aws:kinesis:us-east-1:123456789012:stream/sim"

// simGen is one life of the stream (it may be deleted and created again
// under its name): its shards, where each starts, and where the finite
// ones end (the number of their last record).
type simGen struct {
	created time.Time
	shards  []coord.Shard
	start   map[string]int64
	end     map[string]int64
}

// seq is the sequence number of record n of a shard of the generation.
func (g *simGen) seq(shard string, n int64) string {
	return strconv.FormatInt(g.start[shard]+n, 10)
}

// index is the number of the record at a position of a shard (0: before
// the first).
func (g *simGen) index(shard string, p *checkpoint.Position) int64 {
	if p == nil {
		return 0
	}
	n, _ := strconv.ParseInt(p.Sequence, 10, 64)
	return n - g.start[shard]
}

// simProc is one process of the binary (an incarnation: a process started
// again under the same instance_id is another simProc).
type simProc struct {
	fleet *simFleet
	w     *simWorld
	name  string
	nonce string
	key   string // orders its events
	inc   int

	lc    *leaseCoordination
	c     *leaseCoordinator
	clock simClock
	log   *simLog

	startedAt time.Time
	joinedAt  time.Time // zero until Load and the first pin succeeded
	joined    bool
	refused   bool // another live process had its name: it exited
	stopping  bool // a clean stop is under way
	stopped   bool // stopped cleanly (or refused)
	crashed   bool
	crashedAt time.Time

	// cycleStarted is when its last cycle started; longestCycle and
	// widestGap the longest a cycle took and the longest between two
	// starts, since they were last reset (the scale test).
	cycleStarted            time.Time
	longestCycle, widestGap time.Duration

	// scannedAt is when the table was as the last scan it read saw it:
	// what its asks were decided on.
	scannedAt time.Time

	pausedUntil time.Time
	episodes    []simEpisode
	// discoverAt, when set, is when its next discovery comes (sooner than
	// its period).
	discoverAt time.Time
	noise      simFaults

	gen      int  // the generation of the stream it reads
	unpinned bool // reset, and the new generation's shards not pinned yet
	readers  map[string]*simReader
	// handedTo is, by shard, the number of the last record its readers
	// handed out.
	handedTo map[simKey]int64
}

func (p *simProc) pausedAt(t time.Time) bool { return t.Before(p.pausedUntil) }

// pause stops p until t, or later if it is paused longer already: a second
// pause never ends the first early (what p deferred to the end of the first
// would then run after what it does next, acknowledgements out of order).
func (p *simProc) pause(until time.Time) {
	if until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
}

// down reports whether the process no longer runs (crashed, stopped, or
// the schedule is over).
func (p *simProc) down() bool { return p.crashed || p.stopped || p.w.over }

// impostor reports whether another process took over its name.
func (p *simProc) impostor() bool { return p.c.impostor.Load() }

// simEpisode is a fault of a process over a time.
type simEpisode struct {
	kind     string // partition, scans, slow, lossy, acks, pause
	from, to time.Time
}

// simFaults are the faults of a process at one time.
type simFaults struct {
	failBefore, loseAnswer, slow, staleRate float64
	partition, scansFail                    bool
	slowAcks                                bool
}

type simMode int

const (
	simOK simMode = iota
	simFailBefore
	simLoseAnswer
)

func (p *simProc) faultsAt(t time.Time) simFaults {
	f := p.noise
	if !t.Before(p.fleet.calmFrom) {
		f = simFaults{} // the calm: the table answers every call, at once
	}
	for _, e := range p.episodes {
		if t.Before(e.from) || !t.Before(e.to) {
			continue
		}
		switch e.kind {
		case "partition":
			f.partition = true
		case "scans":
			f.scansFail = true
		case "slow":
			f.slow = 0.8
		case "lossy":
			f.loseAnswer = 0.3
		case "acks":
			f.slowAcks = true
		}
	}
	return f
}

// latency is how long a call takes: a few milliseconds, or (slow: the
// table throttles and the SDK retries) a good part of a lease period.
func (f simFaults) latency(rng *rand.Rand, period time.Duration) time.Duration {
	if rng.Float64() < f.slow {
		return period/8 + time.Duration(rng.Int64N(int64(period*3/8)))
	}
	return time.Millisecond + time.Duration(rng.Int64N(int64(9*time.Millisecond)))
}

func (f simFaults) mode(rng *rand.Rand, op string) simMode {
	if f.partition || (f.scansFail && (op == "Scan" || op == "ScanConsistent")) {
		return simFailBefore
	}
	r := rng.Float64()
	switch {
	case r < f.failBefore:
		return simFailBefore
	case r < f.failBefore+f.loseAnswer:
		return simLoseAnswer
	}
	return simOK
}

func (f simFaults) stale(rng *rand.Rand) bool { return rng.Float64() < f.staleRate }

// newProc makes a process of instance name; start boots it at t.
func (f *simFleet) newProc(name string) *simProc {
	f.incs++
	p := &simProc{fleet: f, w: f.w, name: name, inc: f.incs, key: fmt.Sprintf("p%03d", f.incs),
		nonce: fmt.Sprintf("n%03d", f.incs), readers: map[string]*simReader{}, handedTo: map[simKey]int64{}, noise: f.noise, log: f.log}
	p.clock = simClock{w: f.w, p: p}
	store := &simStore{t: f.table, w: f.w, p: p}
	p.lc = newLeaseCoordination(store, Options{InstanceID: name, LeasePeriod: f.period, StealLimit: 4, ByLoad: f.byLoad, Clock: p.clock})
	p.lc.nonce = p.nonce
	// Half the processes read every change the log names alone, however
	// few the shards (the coordinators read them alone only beside many);
	// at scale, all read as in production, or as readsPerScan says.
	switch {
	case f.readsPerScan != 0:
		p.lc.readsPerScan = f.readsPerScan
	case !f.scale && f.w.rng.IntN(2) == 0:
		p.lc.readsPerScan = 1
	}
	f.procs = append(f.procs, p)
	return p
}

// start boots p at t: Load (a refusal ends it), the first pin, then its
// loops.
func (p *simProc) start(t time.Time) {
	p.w.spawn(p, t, p.key, func() {
		p.startedAt = p.w.now
		gen := p.fleet.gens[p.fleet.gen]
		res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(p.log.handler(p)))))
		st := coord.Stream{Name: "sim", ARN: simARN, Created: gen.created, Log: res.Logger(), Metrics: coord.NewMetrics(res.Metrics()),
			StartFor: func(bool) checkpoint.Start { return checkpoint.Start{Kind: "TRIM_HORIZON"} }}
		p.c = p.lc.stream(st, coord.NewPositions(checkpoint.Stream{}))
		ctx := context.Background()
		p.gen = 0 // until the first pin, from a listing taken just before it
		var first coord.FirstPin
		for {
			if p.down() {
				return
			}
			var err error
			if first, err = p.c.Load(ctx); err == nil {
				break
			}
			if strings.Contains(err.Error(), "is in use by another running process") {
				p.refused, p.stopped = true, true
				p.fleet.note(p, "refused at start: %v", err)
				return
			}
			if p.clock.Sleep(ctx, p.fleet.period/3) != nil {
				return
			}
		}
		for {
			// As the input's first discovery: a listing that shows the
			// stream created again since the checkpoints were read resets
			// before anything is pinned.
			p.gen = p.fleet.gen
			listed := map[string]coord.Shard{}
			for _, sh := range p.fleet.gens[p.gen].shards {
				listed[sh.ID] = sh
			}
			if _, _, _, reused := p.c.pos.Reused(listed); reused {
				if p.c.Reset(ctx, p.fleet.gens[p.gen].created) == nil {
					first = coord.FirstPin{Due: true, Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}
				}
			} else if p.c.Pin(ctx, p.fleet.gens[p.gen].shards, first.Start, first.Due) == nil {
				break
			}
			if p.clock.Sleep(ctx, p.fleet.period/3) != nil {
				return
			}
		}
		p.joined, p.joinedAt = true, p.w.now
		p.fleet.note(p, "joined")
		p.w.spawn(p, p.w.now, p.key, p.commitLoop)
		p.w.spawn(p, p.w.now, p.key, p.runLoop)
	})
}

// commitLoop commits every commit period, as the input's does (a ticker:
// a commit that takes longer skips ticks).
func (p *simProc) commitLoop() {
	ctx := context.Background()
	every := p.lc.CommitEvery(p.fleet.commitPeriod)
	next := p.w.now
	for {
		next = next.Add(every)
		if next.Before(p.w.now) {
			next = p.w.now.Add(every - p.w.now.Sub(next)%every)
		}
		p.w.park(p, next)
		if p.down() || p.stopping {
			return
		}
		_ = p.c.Commit(ctx)
	}
}

// runLoop is the stream's run loop: cycles when the coordinator asks,
// discovers every lease period (a stream created again is found then; a
// pin that failed is made again then), and starts readers after each
// (none while unpinned), and when the coordinator says what may be read
// changed (polled).
func (p *simProc) runLoop() {
	ctx := context.Background()
	period := p.fleet.period
	nextCycle := p.w.now
	nextDiscovery := p.w.now.Add(time.Duration(p.w.rng.Int64N(int64(period))))
	var retry time.Duration
	for {
		if !p.discoverAt.IsZero() {
			nextDiscovery, p.discoverAt = minTime(nextDiscovery, p.discoverAt), time.Time{}
		}
		p.w.park(p, minTime(nextCycle, nextDiscovery, p.w.now.Add(period/20)))
		if p.down() || p.stopping {
			return
		}
		now := p.w.now
		if !now.Before(nextDiscovery) {
			// As the input's: a discovery that failed (its pin) is tried
			// again after a backoff from a tenth of the interval.
			nextDiscovery = p.w.now.Add(period)
			if !p.discover(ctx) {
				retry = min(2*max(retry, period/20), period)
				nextDiscovery = p.w.now.Add(retry)
			} else {
				retry = 0
			}
		}
		if !now.Before(nextCycle) {
			if !p.cycleStarted.IsZero() {
				p.widestGap = max(p.widestGap, p.w.now.Sub(p.cycleStarted))
			}
			p.cycleStarted = p.w.now
			nextCycle = p.w.now.Add(p.c.Cycle(ctx, p.readable))
			p.longestCycle = max(p.longestCycle, p.w.now.Sub(p.cycleStarted))
		}
		select {
		case <-p.c.Changed():
		default:
		}
		p.schedule()
	}
}

func minTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}

// discover finds a stream created again: it stops its readers, resets the
// coordinator and pins the new shards (again at the next discovery, if
// that failed). It reports whether it succeeded.
func (p *simProc) discover(ctx context.Context) bool {
	listed := map[string]coord.Shard{}
	for _, sh := range p.fleet.gens[p.fleet.gen].shards {
		listed[sh.ID] = sh
	}
	// As the input's: the stream's creation time moved, or a shard id
	// starts at another sequence number than its checkpoint's.
	if _, _, _, reused := p.c.pos.Reused(listed); reused || p.gen != p.fleet.gen {
		for _, r := range p.readers {
			r.stopReq = true
		}
		if err := p.c.Reset(ctx, p.fleet.gens[p.fleet.gen].created); err != nil {
			return false
		}
		p.fleet.note(p, "reset: the stream was created again")
		p.gen, p.unpinned = p.fleet.gen, true
		for _, sh := range p.fleet.gens[p.gen].shards {
			p.fleet.readAt[simKey{p.gen, sh.ID}] = p.w.now // the new stream is read from here on
		}
	}
	if p.unpinned {
		err := p.c.Pin(ctx, p.fleet.gens[p.gen].shards, checkpoint.Start{Kind: "TRIM_HORIZON"}, true)
		if err == nil {
			p.unpinned = false
		}
		p.fleet.trace(p, "pin: %v", err)
	}
	return !p.unpinned
}

func (p *simProc) readable(shardID string) bool {
	_, ok := p.fleet.gens[p.gen].start[shardID]
	return ok
}

// schedule starts a reader of every shard of its generation that is not
// ended, has none running, and is granted.
func (p *simProc) schedule() {
	if p.down() || p.stopping || p.unpinned || p.impostor() {
		p.fleet.trace(p, "schedules nothing: down %v stopping %v unpinned %v impostor %v", p.down(), p.stopping, p.unpinned, p.impostor())
		return
	}
	gen := p.fleet.gens[p.gen]
	for _, sh := range gen.shards {
		if p.readers[sh.ID] != nil {
			continue
		}
		if cp, ok := p.c.pos.Of(sh.ID); !ok || cp.Ended {
			if _, held := p.c.book.stateOf(sh.ID); held {
				p.fleet.trace(p, "holds %s, not in its positions (%v) or ended (%+v)", sh.ID, ok, cp)
			}
			continue
		}
		r := &simReader{p: p, id: sh.ID, gen: p.gen, key: p.key + "/" + sh.ID}
		g, ok := p.c.Acquire(sh.ID, func(error) { r.stopReq = true })
		if !ok {
			if st, held := p.c.book.stateOf(sh.ID); held {
				p.fleet.trace(p, "no grant of %s: lease %v", sh.ID, st)
			}
			continue
		}
		// What it reads is of the generation its checkpoint is of.
		if start, err := strconv.ParseInt(g.Start().ShardStart, 10, 64); err == nil && start > 0 {
			r.gen = int(start / 1_000_000_000)
		}
		r.g = g
		r.next = p.fleet.gens[r.gen].index(sh.ID, g.Start().Position) + 1
		p.readers[sh.ID] = r
		p.fleet.granted(r, r.next-1)
		p.fleet.readers = append(p.fleet.readers, r)
		p.w.at(p.w.now.Add(time.Duration(p.w.rng.Int64N(int64(p.fleet.handOutEvery)))), r.key, r.step)
	}
}

// crash ends the process at once: nothing of it runs any more, and what
// its calls in flight do to the table still happens.
func (p *simProc) crash() {
	if p.down() {
		return
	}
	p.crashed, p.crashedAt = true, p.w.now
	p.fleet.note(p, "crashed")
}

// stop is a clean stop (SIGTERM): readers stop and settle (handing over
// what was asked for), then a commit and the release, each bounded by a
// lease period.
func (p *simProc) stop() {
	if p.down() || p.stopping {
		return
	}
	p.stopping = true
	p.fleet.note(p, "stopping")
	p.w.spawn(p, p.w.now, p.key, func() {
		ctx := context.Background()
		for len(p.readers) > 0 {
			if p.clock.Sleep(ctx, p.fleet.period/50) != nil {
				return
			}
		}
		if p.joined {
			cctx, cancel := p.lc.Bound(ctx)
			_ = p.c.Commit(cctx)
			cancel()
			rctx, cancel := p.lc.Bound(ctx)
			_ = p.c.Release(rctx)
			cancel()
		}
		p.stopped = true
		p.fleet.note(p, "stopped")
	})
}

// simReader is a shard reader: it hands out a record every handOutEvery
// (jittered) while its grant lasts, each acknowledged after a delay, in
// order.
type simReader struct {
	p   *simProc
	id  string
	gen int
	key string
	g   coord.Grant

	next        int64 // the number of the next record to hand out
	outstanding int
	lastAcked   int64
	ackAt       time.Time
	stopReq     bool // told to stop (the grant's stop)
	stopping    bool
	done        bool
}

func (r *simReader) step() {
	p, f, w := r.p, r.p.fleet, r.p.w
	if p.down() || r.stopping {
		return
	}
	if p.pausedAt(w.now) {
		w.at(p.pausedUntil, r.key, r.step)
		return
	}
	if r.stopReq || p.stopping || !w.now.Before(r.g.Until()) {
		r.stop(false)
		return
	}
	if r.gen != f.gen {
		// A shard of a stream deleted since: nothing to read, until the
		// process finds the stream created again.
		f.trace(p, "reader of %s of generation %d: the stream is of generation %d", r.id, r.gen, f.gen)
		w.at(w.now.Add(f.handOutEvery), r.key, r.step)
		return
	}
	gen := f.gens[r.gen]
	if end := gen.end[r.id]; end > 0 && r.next > end {
		r.stop(true)
		return
	}
	f.readAt[simKey{r.gen, r.id}] = w.now // read (polled), whether or not there is a record
	if f.rate(r.id) == 0 {
		w.at(w.now.Add(f.handOutEvery), r.key, r.step) // idle: nothing to hand out
		return
	}
	n := r.next
	r.next++
	f.trace(p, "hands out %s record %d (grant until %.3fs)", r.id, n, r.g.Until().Sub(simEpoch).Seconds())
	f.handOut(r, n)
	r.g.Read(int(f.rate(r.id)*f.handOutEvery.Seconds()), time.Time{})
	delay := time.Duration(w.rng.Int64N(int64(f.period / 40)))
	if p.faultsAt(w.now).slowAcks {
		delay = time.Duration(w.rng.Int64N(int64(f.period * 3 / 2)))
	}
	at := w.now.Add(delay)
	if at.Before(r.ackAt) {
		at = r.ackAt
	}
	r.ackAt = at
	r.outstanding++
	p.handedTo[simKey{r.gen, r.id}] = max(p.handedTo[simKey{r.gen, r.id}], n)
	w.at(at, r.key, func() { r.ack(n) })
	jitter := time.Duration(w.rng.Int64N(int64(f.handOutEvery / 2)))
	w.at(w.now.Add(f.handOutEvery*3/4+jitter), r.key, r.step)
}

// ack is the pipeline's acknowledgement of record n.
func (r *simReader) ack(n int64) {
	p, w := r.p, r.p.w
	if p.crashed || w.over {
		return
	}
	if p.pausedAt(w.now) {
		w.at(p.pausedUntil, r.key, func() { r.ack(n) })
		return
	}
	gen := p.fleet.gens[r.gen]
	r.g.Acked(checkpoint.Position{Sequence: gen.seq(r.id, n)})
	if lg, ok := r.g.(*leaseGrant); ok {
		lg.c.book.mu.Lock()
		p.fleet.trace(p, "%s record %d acknowledged: lease cp %v, reads %v, state %v", r.id, n, lg.h.cp.Position, lg.c.book.reads(lg), lg.h.state)
		lg.c.book.mu.Unlock()
	}
	r.outstanding--
	r.lastAcked = n
	p.fleet.acked(r, n)
}

// settled waits until every record handed out is acknowledged.
func (r *simReader) settled(ctx context.Context) error {
	for r.outstanding > 0 {
		if err := r.p.clock.Sleep(ctx, r.p.fleet.period/50); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the reader as the input's does: at the shard's end (ended),
// once every record is acknowledged, it stores the end; then, what it
// handed out settled, it tells the grant.
func (r *simReader) stop(ended bool) {
	r.stopping = true
	p := r.p
	p.fleet.trace(p, "reader of %s stops (end %v, told %v)", r.id, ended, r.stopReq)
	p.w.spawn(p, p.w.now, r.key, func() {
		ctx := context.Background()
		if ended && r.settled(ctx) == nil {
			var last *checkpoint.Position
			if r.lastAcked > 0 {
				last = &checkpoint.Position{Sequence: p.fleet.gens[r.gen].seq(r.id, r.lastAcked)}
			}
			for !r.stopReq && !p.down() {
				err := r.g.Ended(ctx, last)
				if err == nil {
					p.fleet.note(p, "stored the end of %s", r.id)
					break
				}
				p.fleet.trace(p, "storing the end of %s: %v", r.id, err)
				if p.clock.Sleep(ctx, p.fleet.period/10) != nil {
					return
				}
			}
		}
		if p.down() {
			return
		}
		r.g.Stopped(ctx, r.settled)
		p.fleet.trace(p, "reader of %s stopped", r.id)
		r.done = true
		if p.readers[r.id] == r {
			delete(p.readers, r.id)
		}
	})
}

// simLog keeps the last lines of the coordinators' logs and of the
// simulation's own notes, each with the virtual time: what a failure
// report shows.
type simLog struct {
	w     *simWorld
	level slog.Level
	lines []string
	keep  int
}

func (l *simLog) add(line string) {
	l.lines = append(l.lines, line)
	if len(l.lines) > 2*l.keep {
		l.lines = slices.Clone(l.lines[len(l.lines)-l.keep:])
	}
}

func (l *simLog) last() []string {
	if len(l.lines) > l.keep {
		return l.lines[len(l.lines)-l.keep:]
	}
	return l.lines
}

func (l *simLog) handler(p *simProc) slog.Handler { return &simLogHandler{l: l, p: p} }

type simLogHandler struct {
	l *simLog
	p *simProc
}

func (h *simLogHandler) Enabled(_ context.Context, lv slog.Level) bool { return lv >= h.l.level }

func (h *simLogHandler) Handle(_ context.Context, r slog.Record) error {
	h.l.add(fmt.Sprintf("%9.3fs %s %s(%s) %s: %s", h.l.w.now.Sub(simEpoch).Seconds(), h.p.key, h.p.name, h.p.nonce, r.Level, r.Message))
	return nil
}

func (h *simLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *simLogHandler) WithGroup(string) slog.Handler      { return h }

var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
