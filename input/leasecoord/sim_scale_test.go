package leasecoord

// The lease coordination at internet scale, in virtual time: many
// processes start together on many idle shards of one lease table
// (lease.Memory, which bills each call as DynamoDB would), with no fault.
// What it measures: the time to balance from a common start, what the
// table costs in steady state against KCL's documented behaviour for the
// same fleet, how soon a crashed process's shards are taken, and how soon
// every other process sees each of those takes.

import (
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
)

var (
	scaleShards    = flag.Int("sim.scale.shards", 2000, "shards of TestSimulationAtScale (make sim-scale: 10,000)")
	scaleInstances = flag.Int("sim.scale.instances", 20, "processes of TestSimulationAtScale (make sim-scale: 100)")
	// A huge value makes every change scanned for, as before the change
	// log: the baseline of its figures.
	scaleBusyShards    = flag.Int("sim.scale.busy.shards", 256, "shards of TestSimulationAtScaleBusy (make sim-scale: 1,024)")
	scaleBusyInstances = flag.Int("sim.scale.busy.instances", 8, "processes of TestSimulationAtScaleBusy (make sim-scale: 16)")
	scaleReadsPerScan  = flag.Int("sim.scale.readsperscan", 0, "with TestSimulationAtScale: read changes alone only when fewer than the shards over this (0: as in production)")
)

// scaleResult is what a run at scale measured.
type scaleResult struct {
	balanced   time.Duration // from the common start
	readUnits  float64       // per second, steady state
	writeUnits float64
	calls      float64
	usage      map[string]lease.Usage // steady state, per second
	takenOver  time.Duration          // from the crash until every shard of the crashed process is owned again
	seenWithin time.Duration          // the longest time a take of them took to show in another process's view
	seenCount  int
	// When a process joins the balanced fleet: how soon each ask showed
	// in its holder's view, and each handover in every other process's.
	askSeen, handoverSeen time.Duration
	asks, handovers       int
	// While it joins (six lease periods): the scans of the stream's
	// items, the items read alone, and the read units of all reads.
	joinScans, joinReads int64
	joinReadUnits        float64
	// ... and the longest cycle of a process, and the longest between
	// the starts of two cycles of one.
	joinCycle, joinGap time.Duration
	scansSteady        int64 // scans in the steady-state window
	crashedHeld        int
	kclWriteUnit       float64 // KCL's renewals per second for the same fleet
}

// runAtScale runs shards over instances at lease period period: from a
// common start to balance, the steady state and, unless busy, a crash and
// a process joining. Busy: every shard hands out records every half
// commit period (each is checkpointed at each commit), as against idle
// (renewed by heartbeats alone).
func runAtScale(t *testing.T, shards, instances int, period time.Duration, busy bool) scaleResult {
	t.Helper()
	w := newSimWorld(1)
	f := &simFleet{w: w, log: &simLog{w: w, level: slog.LevelWarn, keep: 200}, period: period, commitPeriod: time.Second,
		out: map[simKey]map[int64][]simHandOut{}, ackedTo: map[simKey]int64{}, acks: map[simKey]map[int64]bool{},
		excuses: map[simKey][]time.Time{}, askedAt: map[simKey]time.Time{}, readAt: map[simKey]time.Time{}, ended: map[simKey]bool{}, rates: map[string]float64{},
		gens: []*simGen{nil}, recreatedAt: w.now.Add(-time.Hour)}
	f.handOutEvery = f.period / 8
	if busy {
		f.handOutEvery = f.commitPeriod / 2
	}
	f.scale, f.readsPerScan = true, *scaleReadsPerScan
	f.table = &simTable{mem: lease.NewMemory(), onApplied: f.applied}
	f.gen = 1
	g := &simGen{created: w.now, start: map[string]int64{}, end: map[string]int64{}}
	for i := range shards {
		id := fmt.Sprintf("shardId-%012d", i)
		start := int64(1_000_000_000) + int64(i)*10_000 // within generation 1 (sequence numbers / 1e9), idle shards
		g.shards = append(g.shards, coord.Shard{ID: id, StartSeq: fmt.Sprint(start)})
		g.start[id] = start
		f.rates[id] = 0 // idle: leases renewed by heartbeats alone
		if busy {
			f.rates[id] = 100 // records a second: checkpointed at every commit
		}
		f.readAt[simKey{1, id}] = w.now
	}
	f.gens = append(f.gens, g)
	start := w.now.Add(time.Second)
	for i := range instances {
		f.newProc(fmt.Sprintf("w%03d", i)).start(start)
	}
	light := func() error {
		if f.failure != "" {
			return fmt.Errorf("%s", f.failure)
		}
		return nil
	}
	var res scaleResult
	owners := func() map[string]int {
		n := map[string]int{}
		for _, it := range f.table.mem.Items() {
			n[it.Owner]++
		}
		return n
	}
	balanced := func(n map[string]int, procs int) bool {
		if n[""] > 0 || len(n) != procs {
			return false
		}
		lo, hi := shards, 0
		for _, k := range n {
			lo, hi = min(lo, k), max(hi, k)
		}
		return hi-lo <= 1
	}
	// Balance from the common start, checked every 100 ms.
	var balancedAt time.Time
	for at := start; at.Before(start.Add(10 * period)); at = at.Add(100 * time.Millisecond) {
		if err := w.runUntil(at, light); err != nil {
			t.Fatal(err)
		}
		if balanced(owners(), instances) {
			balancedAt = w.now
			break
		}
	}
	if balancedAt.IsZero() {
		t.Fatalf("%d shards over %d processes not balanced within 10 lease periods of a common start: %v", shards, instances, summarizeOwners(owners()))
	}
	res.balanced = balancedAt.Sub(start)

	// Steady state: a lease period to settle, then three measured.
	if err := w.runUntil(w.now.Add(period), light); err != nil {
		t.Fatal(err)
	}
	u0, scans0 := f.table.mem.Usage(), scansOf(f)
	window := 3 * period
	if err := w.runUntil(w.now.Add(window), light); err != nil {
		t.Fatal(err)
	}
	u1, scans1 := f.table.mem.Usage(), scansOf(f)
	res.usage = map[string]lease.Usage{}
	for k, u := range u1 {
		d := lease.Usage{Calls: u.Calls - u0[k].Calls, ReadUnits: (u.ReadUnits - u0[k].ReadUnits) / window.Seconds(), WriteUnits: (u.WriteUnits - u0[k].WriteUnits) / window.Seconds()}
		if d.Calls > 0 {
			res.usage[k] = d
			res.calls += float64(d.Calls) / window.Seconds()
			res.readUnits += d.ReadUnits
			res.writeUnits += d.WriteUnits
		}
	}
	res.scansSteady = scans1 - scans0
	res.kclWriteUnit = float64(shards) / (period / 3).Seconds()
	if busy {
		return res
	}

	// A crash: every shard of the process taken by others, and each take
	// seen by every other process.
	victim := f.procs[len(f.procs)/2]
	var held []string
	for _, it := range f.table.mem.Items() {
		if it.Owner == victim.name {
			held = append(held, it.ShardID)
		}
	}
	res.crashedHeld = len(held)
	crashAt := w.now
	victim.crash()
	takenAt := map[string]time.Time{}
	seen := map[string]time.Time{} // proc/shard: when its view first showed the new owner
	for at := crashAt; at.Before(crashAt.Add(5 * period)); at = at.Add(10 * time.Millisecond) {
		if err := w.runUntil(at, light); err != nil {
			t.Fatal(err)
		}
		items := map[string]lease.Shard{}
		for _, it := range f.table.mem.Items() {
			items[it.ShardID] = it
		}
		for _, id := range held {
			if it := items[id]; it.Owner != victim.name && it.Owner != "" {
				if _, ok := takenAt[id]; !ok {
					takenAt[id] = w.now
				}
			}
		}
		for _, p := range f.procs {
			if p == victim || p.down() {
				continue
			}
			p.c.view.mu.Lock()
			for id, at := range takenAt {
				k := p.name + "/" + id
				if _, ok := seen[k]; ok {
					continue
				}
				if it, ok := p.c.view.items[id]; ok && it.Owner == items[id].Owner {
					seen[k] = w.now
					res.seenWithin = max(res.seenWithin, w.now.Sub(at))
				}
			}
			p.c.view.mu.Unlock()
		}
		if len(takenAt) == len(held) && len(seen) == len(held)*(instances-1) {
			break
		}
	}
	if len(takenAt) < len(held) {
		t.Fatalf("%d of the %d shards of the crashed process taken within 5 lease periods", len(takenAt), len(held))
	}
	for _, at := range takenAt {
		res.takenOver = max(res.takenOver, at.Sub(crashAt))
	}
	res.seenCount = len(seen)

	// A process joins: it asks holders for leases, they hand them over.
	type change struct {
		at            time.Time
		shard, by, to string // to: the new owner (a handover), or the asker (an ask)
		holder        string // of an ask
		ask           bool
		seen          map[string]bool
	}
	var changes []*change
	f.table.onApplied = func(p *simProc, op string, before, after lease.Shard, wr lease.Write) {
		f.applied(p, op, before, after, wr)
		switch {
		case op == "Ask":
			changes = append(changes, &change{at: w.now, shard: after.ShardID, by: p.name, to: p.name, holder: before.Owner, ask: true, seen: map[string]bool{}})
		case op == "Hold" && wr.Release && wr.HandOver != "":
			changes = append(changes, &change{at: w.now, shard: after.ShardID, by: p.name, to: wr.HandOver, seen: map[string]bool{}})
		}
	}
	joiner := f.newProc("w-new")
	joinAt := w.now
	uj := f.table.mem.Usage()
	for _, p := range f.procs {
		p.longestCycle, p.widestGap = 0, 0
	}
	joiner.start(joinAt)
	for at := joinAt; at.Before(joinAt.Add(6 * period)); at = at.Add(20 * time.Millisecond) {
		if err := w.runUntil(at, light); err != nil {
			t.Fatal(err)
		}
		for _, ch := range changes {
			for _, p := range f.procs {
				if p == victim || p.down() || !p.joined || ch.seen[p.name] || p.name == ch.by {
					continue
				}
				p.c.view.mu.Lock()
				it, ok := p.c.view.items[ch.shard]
				p.c.view.mu.Unlock()
				switch {
				case ch.ask && p.name == ch.holder && ok && (it.HandoffTo == ch.to || it.Owner != ch.holder):
					ch.seen[p.name] = true
					res.askSeen = max(res.askSeen, w.now.Sub(ch.at))
				case !ch.ask && ok && it.Owner == ch.to:
					ch.seen[p.name] = true
					res.handoverSeen = max(res.handoverSeen, w.now.Sub(ch.at))
				}
			}
		}
	}
	uj1 := f.table.mem.Usage()
	for _, p := range f.procs {
		if p != victim && p != joiner {
			res.joinCycle, res.joinGap = max(res.joinCycle, p.longestCycle), max(res.joinGap, p.widestGap)
		}
	}
	res.joinScans = uj1["Scan/table"].Calls - uj["Scan/table"].Calls
	res.joinReads = uj1["GetItem/shard"].Calls - uj["GetItem/shard"].Calls
	for k, u := range uj1 {
		res.joinReadUnits += u.ReadUnits - uj[k].ReadUnits
	}
	for _, ch := range changes {
		if ch.ask {
			res.asks++
		} else {
			res.handovers++
		}
	}
	w.over = true
	w.drain()
	return res
}

// scansOf counts the scans of the stream's items the processes made.
func scansOf(f *simFleet) int64 {
	return f.table.mem.Usage()["Scan/table"].Calls
}

func summarizeOwners(n map[string]int) string {
	counts := map[int]int{}
	for owner, k := range n {
		if owner != "" {
			counts[k]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d hold %d", counts[k], k))
	}
	return fmt.Sprintf("%d free; %s", n[""], strings.Join(parts, ", "))
}

// TestSimulationAtScale: 2,000 idle shards over 20 processes at
// lease_period 10s (make sim-scale: 10,000 over 100, about five minutes):
// from a common start every shard is owned and the shares are within one
// of each other within two lease periods; a crashed process's shards are
// taken within 1.5 lease periods, and each take shows in every other
// process's view within a lease cycle (a third of a lease period, and the
// reads of the cycle that sees it), as do the asks and handovers of a
// process joining the fleet; in steady state no
// process scans the stream's items, and the table costs at most a
// fiftieth of KCL's one renewal per lease every third of the failover
// time, for the same fleet.
func TestSimulationAtScale(t *testing.T) {
	t.Parallel()
	shards, instances := *scaleShards, *scaleInstances
	const period = 10 * time.Second
	res := runAtScale(t, shards, instances, period, false)
	month := ddbcost.Monthly(res.writeUnits, res.readUnits)
	kcl := ddbcost.Monthly(res.kclWriteUnit, 0)
	var ops []string
	for _, k := range slices.Sorted(maps.Keys(res.usage)) {
		u := res.usage[k]
		ops = append(ops, fmt.Sprintf("%s %.1f calls/s %.1f RU/s %.1f WU/s", k, float64(u.Calls)/(3*period).Seconds(), u.ReadUnits, u.WriteUnits))
	}
	t.Logf("%d shards over %d processes, lease_period %v, in virtual time: balanced %v (%.2f lease periods) after a common start; steady state %.1f calls/s, %.1f read and %.1f write units/s, $%.2f a month ($%.4f a shard, $%.3f an instance), %d scans; KCL for the same fleet: %.0f write units/s, $%.0f a month (%.0f times ours); a crashed process's %d shards taken within %v (%.2f lease periods), each take seen by all %d others within %v",
		shards, instances, period, res.balanced.Round(time.Millisecond), res.balanced.Seconds()/period.Seconds(),
		res.calls, res.readUnits, res.writeUnits, month, month/float64(shards), month/float64(instances), res.scansSteady,
		res.kclWriteUnit, kcl, kcl/month, res.crashedHeld, res.takenOver.Round(time.Millisecond), res.takenOver.Seconds()/period.Seconds(),
		instances-1, res.seenWithin.Round(time.Millisecond))
	t.Logf("steady state by request: %s", strings.Join(ops, "; "))
	t.Logf("a process joining the balanced fleet: %d asks, each seen by its holder within %v; %d handovers, each seen by every other process within %v; over the 6 lease periods, %d scans of the stream's items and %d items read alone, %.0f read units in all; the other processes' cycles took %v at most, and started at most %v apart",
		res.asks, res.askSeen.Round(time.Millisecond), res.handovers, res.handoverSeen.Round(time.Millisecond), res.joinScans, res.joinReads, res.joinReadUnits,
		res.joinCycle.Round(time.Millisecond), res.joinGap.Round(time.Millisecond))
	if res.asks == 0 || res.handovers == 0 {
		t.Errorf("a process joining the balanced fleet was handed nothing (%d asks, %d handovers)", res.asks, res.handovers)
	}
	// Within a lease cycle: cycles start a third of a lease period apart,
	// and the one after a change sees it, once its reads are answered
	// (the poll, the items the change log names, the profiles that moved:
	// a few calls of 1-10 ms here, allowed a hundredth of a lease period).
	cycle := period/3 + period/100
	if res.joinGap > cycle {
		t.Errorf("two cycles of a process started %v apart while a process joined, want a third of a lease period (%v)", res.joinGap, period/3)
	}
	if res.askSeen > cycle || res.handoverSeen > cycle {
		t.Errorf("an ask seen %v after it, a handover %v: want within a lease cycle (%v, and its reads)", res.askSeen, res.handoverSeen, period/3)
	}
	if res.balanced > 2*period {
		t.Errorf("balanced %v after the start, want within 2 lease periods", res.balanced)
	}
	if res.takenOver > period*3/2 {
		t.Errorf("the crashed process's shards taken within %v, want 1.5 lease periods", res.takenOver)
	}
	if res.seenWithin > cycle {
		t.Errorf("a take seen by another process %v after it, want within a lease cycle (%v, and its reads)", res.seenWithin, period/3)
	}
	if res.scansSteady != 0 {
		t.Errorf("%d scans of the stream's items in steady state, want none", res.scansSteady)
	}
	if month > kcl/50 {
		t.Errorf("$%.2f a month, more than a fiftieth of KCL's $%.0f", month, kcl)
	}
}

// TestSimulationAtScaleBusy: 256 busy shards over 8 processes (make
// sim-scale: 1,024 over 16), lease_period 10s, commit_period 1s, every
// shard's reader handing out records all along: the checkpoints cost a
// write unit per shard and commit period at most, reported apart from the
// rest, and they trigger no scan of the stream's items (nor a read of
// one: they are not announced as changes).
func TestSimulationAtScaleBusy(t *testing.T) {
	t.Parallel()
	shards, instances := *scaleBusyShards, *scaleBusyInstances
	const period = 10 * time.Second
	res := runAtScale(t, shards, instances, period, true)
	cp := res.usage["UpdateItem/shard"]
	rest := scaleResult{}
	var ops []string
	for _, k := range slices.Sorted(maps.Keys(res.usage)) {
		u := res.usage[k]
		ops = append(ops, fmt.Sprintf("%s %.1f calls/s %.1f RU/s %.1f WU/s", k, float64(u.Calls)/(3*period).Seconds(), u.ReadUnits, u.WriteUnits))
		if k != "UpdateItem/shard" {
			rest.readUnits += u.ReadUnits
			rest.writeUnits += u.WriteUnits
		}
	}
	cpMonth, restMonth := ddbcost.Monthly(cp.WriteUnits, cp.ReadUnits), ddbcost.Monthly(rest.writeUnits, rest.readUnits)
	t.Logf("%d busy shards over %d processes, lease_period %v, commit_period 1s, in virtual time: balanced %v after a common start; steady state %.1f calls/s, %.1f read and %.1f write units/s, $%.2f a month: the checkpoints %.1f write units/s, $%.2f ($%.2f a shard), the rest %.1f read and %.1f write units/s, $%.2f; %d scans",
		shards, instances, period, res.balanced.Round(time.Millisecond), res.calls, res.readUnits, res.writeUnits, cpMonth+restMonth,
		cp.WriteUnits, cpMonth, cpMonth/float64(shards), rest.readUnits, rest.writeUnits, restMonth, res.scansSteady)
	t.Logf("steady state by request: %s", strings.Join(ops, "; "))
	if reads := res.usage["GetItem/shard"].Calls; res.scansSteady != 0 || reads != 0 {
		t.Errorf("%d scans of the stream's items and %d items read alone in steady state with busy shards, want none: checkpoints change no owner", res.scansSteady, reads)
	}
	if limit := float64(shards) * 1.05; cp.WriteUnits > limit || cp.WriteUnits < float64(shards)/2 {
		t.Errorf("%.1f checkpoint write units a second for %d busy shards at commit_period 1s, want about one per shard (at most %.0f)", cp.WriteUnits, shards, limit)
	}
}
