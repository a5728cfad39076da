package leasecoord

import (
	"cmp"
	"math"
	"slices"
)

const (
	// loadFloor is the measured throughput, in bytes/s over all leases,
	// below which loads tell the instances nothing: the count decides.
	loadFloor = 1024
	// loadMargin is the hysteresis of a move by load, as a fraction of the
	// mean instance load: a move must lower the busier side of its pair by
	// at least this much. The meters' noise is well below it: each measures
	// the rate records arrive at (a reader's pauses and bursts do not
	// show), smoothed over three lease periods (loadWindow), and a lease
	// that moves keeps its rate (leaseBook.took).
	loadMargin = 0.1
	// alikeSpread is how far apart, as a fraction of the lightest, the
	// leases of two instances may weigh and still count as alike: between
	// instances holding alike leases only the count moves leases (two
	// apart or more), so that equal shards whose counts are within one
	// never move on noise.
	alikeSpread = 0.2
)

// balanceLoad is balance by measured load: it decides which leases me takes
// now and which it asks their live holders to hand over (at most steals),
// so that every instance ends up reading about the same throughput rather
// than the same number of shards: a hot shard's holder holds fewer others.
//
// A lease weighs its published load; one not measured weighs the mean of
// the measured ones. A lease asked for counts as its asker's already. An
// instance holding a lease not measured yet (just taken or handed over)
// asks and is asked only by count until it is: its load is a guess, and
// moves made by load on a guess would be moved back once the figure comes,
// while the count rule keeps a start (where every lease is new) spreading
// at once.
//
// balanceLoad plans the cycle of every live instance and returns me's part.
// Every instance plans alike from the same table, so instances whose cycles
// coincide take and ask for different leases instead of racing for the
// same ones:
//
//   - Free and expired leases go, heaviest first, each to the least loaded
//     live instance (then the one holding fewest, then the smallest id).
//   - Then, in up to steals passes, each live instance, lightest first, asks
//     the most loaded instance that has a lease worth moving to it for the
//     lease whose move best evens the two. A lease of load l is worth
//     moving from a giver of load g to an asker of load a when either
//     by load: l > 0 and a+l <= g - loadMargin*mean, mean the mean
//     instance load (the busier side of the pair drops clearly), the
//     lease did not change hands within the dwell (leaseView.dwelling),
//     the two do not hold alike leases only (alikeSpread), and the move
//     leaves the count rule no lease of the asker's that changed hands
//     within the dwell, or that left the giver, to move to the giver, nor
//     the load rule one that left the giver (loadBook.byLoad), or
//     by count: the giver holds at least two leases more and
//     a+l <= g - m/2, m the mean lease weight (the counts even out and the
//     busier side drops by at least half an average lease, more than
//     noise; with about equal loads this is the count rule).
//   - An asker makes no lesser move by load while a closer one waits out
//     its lease's dwell, nor asks a less loaded giver while the most
//     loaded one with a lease worth moving to it has only leases that
//     dwell (it would be undone once the dwell is over): it asks nothing
//     in that plan, for at most the dwell. The plan counts the move it
//     waits for as made, so that a busier asker does not ask that giver
//     meanwhile for a lease the giver would ask back once the move came;
//     the waiting asker itself asks for nothing more on that count.
//
// Why it settles rather than fights: judged on the table as it is (an ask
// of me's is made only if it is worth it with no other instance's planned
// ask counted, see below), every move by load lowers the sum of the
// squared instance loads, and every move
// by count lowers it too (or keeps it, for a lease weighing nothing) and
// lowers the sum of the squared counts. With steady rates there are
// finitely many assignments, so the moves stop. A move never makes its
// asker busier than its giver was, so it makes no new busiest instance,
// and while rates stay its lease is not asked back: that would need the
// asker, after the move, to be clearly busier than the giver was before
// it, which the move ruled out. Nor does it make another lease go back to
// the giver, one that left it earlier: the asker, after the move, may be
// the busier of the two (by up to the lease less the margin), but not so
// much busier that a lease that came from the giver is worth moving back.
// Rates that wander by less than the margins move a lease only where a
// split sat at a margin (the tests see a few such moves in hundreds of
// cycles, none back).
//
// With no lease measured, or less than loadFloor measured in all, it is
// balance.
func balanceLoad(me string, claims []claim, live map[string]bool, steals int) (take, ask []claim) {
	weight, ok := leaseWeights(claims)
	if !ok {
		return balance(me, claims, live, steals)
	}
	live = withoutLapsed(live, claims, me)
	b := newLoadBook(me, claims, live, weight)
	for _, c := range b.splitFree() {
		// An overdue lease was not taken by the instance it fell to: the
		// first that sees it takes it, and the balance corrects the rest.
		if c.to == me || c.overdue {
			take = append(take, c.claim)
		}
	}
	// The plan counts the asks it gives the others as made, but another
	// instance plans from its own scan and may not make them (a lease
	// still dwelling there, say). An ask of me's is made only if it is
	// worth it on the table as it is, with me's own asks counted: one worth
	// it only after another's planned ask would make the pair's busier
	// side busier, and be undone once that ask is made (sim seed 50465:
	// i0 asked i2 for a lease on i2's coming ask of i1, which i2 made a
	// cycle later; the lease went back 11 s on).
	asIs := newLoadBook(me, claims, live, weight)
	asIs.splitFree()
	for _, c := range b.planAsks(steals) {
		if c.to != me || !asIs.worthMoving(c.claim, c.owner, me, asIs.unsure[me] || asIs.unsure[c.owner] || asIs.alike(c.owner, me)) {
			continue
		}
		asIs.move(c.claim, me)
		ask = append(ask, c.claim)
	}
	return take, ask
}

// leaseWeights returns what a lease weighs in the balance: its measured
// load, or the mean measured load when it has none. It returns false when
// no lease was measured or all together carry less than loadFloor.
func leaseWeights(claims []claim) (func(claim) float64, bool) {
	var sum float64
	n := 0
	for _, c := range claims {
		if c.measured {
			sum += c.load
			n++
		}
	}
	if n == 0 || sum < loadFloor {
		return nil, false
	}
	mean := sum / float64(n)
	return func(c claim) float64 {
		if c.measured {
			return c.load
		}
		return mean
	}, true
}

// loadBook is the table as one balanceLoad call counts and plans it: each
// instance's load and lease count (leases held, asked for, or falling to
// it in the plan), the held leases that may still be asked for, by holder,
// and the free ones.
type loadBook struct {
	weight  func(claim) float64
	load    map[string]float64
	count   map[string]int
	weights map[string][]float64 // of the leases counted as each instance's
	askable map[string][]claim
	unsure  map[string]bool // instances holding a lease not measured
	free    []claim
	takers  []string // the live instances, sorted: who takes and asks
	margin  float64  // loadMargin of the mean instance load, in bytes/s
	lease   float64  // the mean lease weight, in bytes/s
}

// planned is a lease falling to an instance in the plan.
type planned struct {
	claim
	to string
}

// newLoadBook counts a table; me is among the live instances even when
// live does not say so.
func newLoadBook(me string, claims []claim, live map[string]bool, weight func(claim) float64) *loadBook {
	b := &loadBook{weight: weight, load: map[string]float64{}, count: map[string]int{me: 0},
		weights: map[string][]float64{}, askable: map[string][]claim{}, unsure: map[string]bool{}}
	for id := range live {
		b.count[id] = 0
	}
	for id := range b.count {
		b.takers = append(b.takers, id)
	}
	slices.Sort(b.takers)
	var total float64
	for _, c := range claims {
		total += weight(c)
		switch {
		case c.owner == "" || c.expired:
			b.free = append(b.free, c)
		case c.asked != "" && (live[c.asked] || c.asked == me):
			b.add(c.asked, c) // coming to its asker
		default:
			b.add(c.owner, c)
			b.unsure[c.owner] = b.unsure[c.owner] || !c.measured
			if c.asked == "" && live[c.owner] {
				b.askable[c.owner] = append(b.askable[c.owner], c)
			}
		}
	}
	b.margin = loadMargin * total / float64(len(b.count))
	b.lease = total / float64(len(claims))
	return b
}

func (b *loadBook) add(id string, c claim) {
	b.load[id] += b.weight(c)
	b.count[id]++
	b.weights[id] = append(b.weights[id], b.weight(c))
}

// alike reports whether the leases of x and y all weigh about the same
// (within alikeSpread of the lightest).
func (b *loadBook) alike(x, y string) bool {
	lo, hi := math.Inf(1), 0.0
	for _, id := range []string{x, y} {
		for _, w := range b.weights[id] {
			lo, hi = min(lo, w), max(hi, w)
		}
	}
	return hi <= lo*(1+alikeSpread)
}

// splitFree gives the free leases, heaviest first, each to the least
// loaded instance.
func (b *loadBook) splitFree() (split []planned) {
	slices.SortFunc(b.free, func(x, y claim) int {
		if d := cmp.Compare(b.weight(y), b.weight(x)); d != 0 {
			return d
		}
		return cmp.Compare(x.shard, y.shard)
	})
	for _, c := range b.free {
		to := slices.MinFunc(b.takers, b.lighter)
		b.add(to, c)
		split = append(split, planned{c, to})
	}
	return split
}

// planAsks plans up to steals passes in which each instance, lightest
// first, asks for one lease. No two instances ask each other in one plan:
// deciding at once, they would swap leases, a move each for what one move
// of the difference does.
func (b *loadBook) planAsks(steals int) (asks []planned) {
	got := map[[2]string]bool{} // asker, giver
	waits := map[string]bool{}  // askers waiting out a dwell
	for range steals {
		askers := slices.Clone(b.takers)
		slices.SortFunc(askers, b.lighter)
		n := len(asks)
		for _, id := range askers {
			if waits[id] {
				// Its later asks would count on the move it waits for,
				// not made yet, and made first they may stop it: the
				// lease it waits for would leave the giver one of them
				// worth sending back (sim seed 58755: i1, holding
				// nothing, waited for i0's heavy lease and asked i0 for
				// a light one meanwhile; the heavy one then stayed, i1
				// took others, and the light one went back 11 s on).
				continue
			}
			c, ok, waited := b.bestAsk(id, got)
			switch {
			case ok:
				got[[2]string{id, c.owner}] = true
				b.move(c, id)
				asks = append(asks, planned{c, id})
			case waited:
				// The asker waits out c's dwell, and asks for it then:
				// the plan counts it as made, so that no busier asker
				// asks c's giver meanwhile for a lease that the giver,
				// once c is gone, asks back (sim seed 501641: i1 asked
				// i3 for a lease while an instance with none waited for
				// i3's heavy one; once that moved, i3 asked i1's back
				// 11 s on).
				got[[2]string{id, c.owner}] = true
				b.move(c, id)
				waits[id] = true
			}
		}
		if len(asks) == n {
			break
		}
	}
	return asks
}

// lighter orders instances by load, then lease count, then id.
func (b *loadBook) lighter(x, y string) int {
	if d := cmp.Compare(b.load[x], b.load[y]); d != 0 {
		return d
	}
	if d := cmp.Compare(b.count[x], b.count[y]); d != 0 {
		return d
	}
	return cmp.Compare(x, y)
}

// bestAsk returns the lease asker asks for next: of the most loaded holder
// with a lease worth moving to it, the one whose move leaves the two
// closest; none while a closer move by load waits out its lease's dwell,
// nor while that holder's only move by load does (a lease worth moving to
// it but for its dwell makes it that holder): then waited is set, and next is
// the dwelling lease it waits for.
func (b *loadBook) bestAsk(asker string, got map[[2]string]bool) (next claim, ok, waited bool) {
	givers := make([]string, 0, len(b.askable))
	for id := range b.askable {
		if id != asker && !got[[2]string{id, asker}] {
			givers = append(givers, id)
		}
	}
	slices.SortFunc(givers, func(x, y string) int { return b.lighter(y, x) })
	a := b.load[asker]
	for _, g := range givers {
		var best claim
		gap := math.Inf(1)
		byCount := b.unsure[asker] || b.unsure[g] || b.alike(g, asker)
		// The closest a move by load would leave the two but for a lease's
		// dwell: a lesser move is not made meanwhile, since once the dwell
		// is over the better one follows and the lesser lease has to come
		// back (sim seed 90928: i1 asked i0 for a light lease while i0's
		// heavy one dwelt, then the heavy one moved, then the light one
		// went back 11 s on).
		waits := math.Inf(1)
		var waitFor claim
		if !byCount {
			for _, c := range b.askable[g] {
				if l := b.weight(c); c.dwelling && b.byLoad(c, g, asker) {
					if d := math.Abs(b.load[g] - l - (a + l)); d < waits || (d == waits && c.shard < waitFor.shard) {
						waits, waitFor = d, c
					}
				}
			}
		}
		// A lease that moved within the dwell is asked for (by count) only
		// when no other will do.
		for _, dwelling := range []bool{false, true} {
			for _, c := range b.askable[g] {
				l := b.weight(c)
				if c.dwelling != dwelling || !b.worthMoving(c, g, asker, byCount) {
					continue
				}
				if d := math.Abs(b.load[g] - l - (a + l)); d < gap || (d == gap && c.shard < best.shard) {
					best, gap = c, d
				}
			}
			if !math.IsInf(gap, 1) {
				if !dwelling && waits < gap {
					return waitFor, false, true
				}
				return best, true, false
			}
		}
		// Nothing to move from g now but a move by load waiting out its
		// dwell: g stays the giver, and no less loaded holder is asked
		// meanwhile, since once the dwell is over the move from g follows
		// and leaves the asker busier than the lesser giver, which asks
		// its lease back (sim seed 82935: i2 asked i3 for a light lease
		// while i4's dwelt, then i4's moved, then i3 asked the light one
		// back 11 s on).
		if !math.IsInf(waits, 1) {
			return waitFor, false, true
		}
	}
	return claim{}, false, false
}

// worthMoving reports whether lease c is worth moving from giver to
// asker: by load or by count, as balanceLoad says; only by count when
// byCount is set (either holds a lease not measured yet, whose load is a
// guess, or the two hold alike leases only).
func (b *loadBook) worthMoving(c claim, giver, asker string, byCount bool) bool {
	if !byCount && !c.dwelling && b.byLoad(c, giver, asker) {
		return true
	}
	l, a, g := b.weight(c), b.load[asker], b.load[giver]
	return b.count[giver] >= b.count[asker]+2 && a+l <= g-b.lease/2
}

// byLoad reports whether lease c is worth moving from giver to asker by
// load, its own dwell aside: the move lowers the busier side of the pair
// clearly, and leaves no lease of the asker's to move to the giver that
// changed hands within the dwell (by count) or that left the giver (by
// count or by load). (A move by load may leave its asker busier than the
// giver, by up to the lease less the margin, and holding two leases more:
// the count rule, or the load rule, then moves one of the asker's to the
// giver, one that it took from the giver, maybe: the lease goes back where
// it came from, and the two moves make a swap (sim seed 16581: by count,
// a lease just taken; seed 76660: by load, a lease taken 11 s before,
// its dwell just over).)
func (b *loadBook) byLoad(c claim, giver, asker string) bool {
	l, a, g := b.weight(c), b.load[asker], b.load[giver]
	if l <= 0 || a+l > g-b.margin {
		return false
	}
	// After the move the asker holds count[asker]+1 and the giver
	// count[giver]-1: the count rule may move a lease of the asker's to
	// the giver only if the asker then holds two more.
	byCount := b.count[asker]+1 >= b.count[giver]-1+2
	for _, x := range b.askable[asker] {
		back := g - l + b.weight(x)
		if byCount && (x.dwelling || x.left == giver) && back <= a+l-b.lease/2 {
			return false
		}
		if x.left == giver && back <= a+l-b.margin {
			return false
		}
	}
	return true
}

// move counts a lease asked for as its asker's.
func (b *loadBook) move(c claim, asker string) {
	b.askable[c.owner] = slices.DeleteFunc(b.askable[c.owner], func(x claim) bool { return x.shard == c.shard })
	if len(b.askable[c.owner]) == 0 {
		delete(b.askable, c.owner)
	}
	b.load[c.owner] -= b.weight(c)
	b.count[c.owner]--
	if ws := b.weights[c.owner]; len(ws) > 0 {
		i := slices.Index(ws, b.weight(c))
		b.weights[c.owner] = slices.Delete(ws, i, i+1)
	}
	b.add(asker, c)
}
