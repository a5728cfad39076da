// Package membudget is a memory budget shared by every shard an input
// reads: the bytes of records read and not yet acknowledged, and of the
// reads under way. A reader takes room before it reads and gives it back
// once what it read is acknowledged; while room is short, readers wait
// their turn, the one that got least room first, so that no shard starves
// while others read.
package membudget

import (
	"context"
	"sync"
	"time"
)

// Budget is a number of bytes shared by readers. Its methods are safe for
// concurrent use. A nil *Budget has no limit: Take grants max at once.
type Budget struct {
	limit int64 // under mu: SetLimit changes it
	made  int64 // the limit it was made with (New), for the valve
	// floor is the least room a take's share is cut to (SetFloor).
	floor int64

	mu   sync.Mutex
	used int64
	// changes numbers the changes of members (under mu); told is the
	// last one onMembers was told of (under countMu, which orders its
	// calls).
	changes uint64
	countMu sync.Mutex
	told    uint64
	// waiters wait for room; next says whose turn it is.
	waiters []*waiter
	// report, when set, is told of every change of used, under mu (so a
	// gauge never ends on a stale value).
	report func(used int64)
	// members are the readers sharing the budget (Join); onMembers, when
	// set, is told how many after each change (OnMembers).
	members   map[*Member]struct{}
	onMembers func(n int)
	arrivals  uint64 // numbers the waiters in the order they came
	// stallAfter, when positive, opens the valve (OnStall); lastGive is
	// when room last came back.
	stallAfter   time.Duration
	stallWaiting func() bool
	onStall      func(granted int64)
	lastGive     time.Time
}

// Member is one reader of a budget (Join). Its turn among the waiters
// comes by the room it was granted so far: the reader that got least goes
// first, so that while room is short the readers advance together, byte for
// byte, rather than each in turn by what its reads happen to bring.
type Member struct {
	b      *Budget
	served int64 // bytes granted since it joined, from the least of the others'
}

type waiter struct {
	member     *Member // nil: a Take without a member, served by arrival
	arrival    uint64
	need, want int64 // the min and max asked for: bounds cuts them to a share
	granted    int64
	ready      chan struct{}
}

// New returns a budget of limit bytes; report, when not nil, is told of
// the bytes in use at every change.
func New(limit int64, report func(used int64)) *Budget {
	return &Budget{limit: limit, made: limit, report: report}
}

// OnStall opens a valve against a pipeline that can only go on with more
// memory than the budget: an output batching more records than the budget
// holds waits for records that wait for room it holds. Once a reader has
// waited for after with no room given back meanwhile, and waiting (when not
// nil) says the pipeline is waiting for records too (not an output that is
// down or slow), the next in turn is granted over the limit: its min, or a
// quarter of the budget as made (New) if that is more (within the max it
// asked for, beyond its share), however SetLimit changed it since, so that
// a valve opening brings more than a record. f (when not nil) is told how
// much. Call it before the budget is used.
func (b *Budget) OnStall(after time.Duration, waiting func() bool, f func(granted int64)) {
	b.stallAfter, b.stallWaiting, b.onStall = after, waiting, f
}

// OnMembers has f told how many readers share the budget after each Join
// and Leave (or after the latest of changes that came together), outside
// the budget's lock and in the order of the changes. f must not call Join
// or Leave. Call it before the budget is used.
func (b *Budget) OnMembers(f func(n int)) {
	b.onMembers = f
}

// membersChanged tells onMembers of n members. It is called with b.mu held
// and releases it; f runs outside it, so that a slow f never holds up
// Take or Give. Calls of f are in the order of the changes, and a count
// that a later one overtook is not told: f hears the latest.
func (b *Budget) membersChanged(n int) {
	f := b.onMembers
	if f == nil {
		b.mu.Unlock()
		return
	}
	b.changes++
	change := b.changes
	b.mu.Unlock()
	b.countMu.Lock()
	defer b.countMu.Unlock()
	if change > b.told {
		b.told = change
		f(n)
	}
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

// SetLimit makes the budget limit bytes from now. Room already taken stays
// taken: a smaller limit is reached as room comes back; a larger one lets
// waiters in at once.
func (b *Budget) SetLimit(limit int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limit = limit
	b.serve()
}

// SetFloor makes floor bytes (at most a quarter of the limit) the least a
// take's share of the budget is cut to (see Join), however many readers
// share it: a read smaller than that costs more in its call than it
// brings, and readers rather take turns at larger ones. Call it before the
// budget is used.
func (b *Budget) SetFloor(floor int64) {
	b.floor = floor
}

// Join counts a reader sharing the budget until it calls Leave. Take
// grants no reader more than twice its fair share, the limit over the
// readers, so that while room is short every reader advances a little at a
// time; and a member's Take (Member.Take) waits its turn
// by the room the member got so far. A reader joins as having got the
// least any other got: a shard read for the first time does not take its
// turns back from those read for hours.
func (b *Budget) Join() *Member {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	m := &Member{b: b}
	first := true
	for o := range b.members {
		if first || o.served < m.served {
			m.served, first = o.served, false
		}
	}
	if b.members == nil {
		b.members = map[*Member]struct{}{}
	}
	b.members[m] = struct{}{}
	b.membersChanged(len(b.members))
	return m
}

// Leave ends m's share of the budget; it may be called more than once.
func (m *Member) Leave() {
	if m == nil {
		return
	}
	b := m.b
	b.mu.Lock()
	if _, ok := b.members[m]; !ok {
		b.mu.Unlock()
		return
	}
	delete(b.members, m)
	b.membersChanged(len(b.members))
}

// Take waits until at least min bytes are free and it is this reader's
// turn, then takes as many as are free, up to max (and twice the reader's
// fair share, see Join), and returns how many. A min larger than the whole
// budget gets the whole budget once nothing else is in use: one read must
// always be possible. It fails only when ctx ends.
//
// A Take of the budget is of no member: it waits its turn by arrival.
func (b *Budget) Take(ctx context.Context, min, max int64) (int64, error) {
	return b.take(ctx, nil, min, max)
}

// Take takes room as the member m, in its turn by the room it got so far
// (see Budget.Take and Join). A nil member (no budget) takes max at once.
// A Member is the shard.Room its reader's publisher takes room from.
func (m *Member) Take(ctx context.Context, min, max int64) (int64, error) {
	if m == nil {
		return max, ctx.Err()
	}
	return m.b.take(ctx, m, min, max)
}

// Force forces n bytes on m's budget (see Budget.Force).
func (m *Member) Force(n int64) {
	if m != nil {
		m.b.Force(n)
	}
}

// Give gives n bytes back to m's budget.
func (m *Member) Give(n int64) {
	if m != nil {
		m.b.Give(n)
	}
}

func (b *Budget) take(ctx context.Context, member *Member, min, max int64) (int64, error) {
	if b == nil {
		return max, ctx.Err()
	}
	need, want := min, max
	b.mu.Lock()
	min, max = b.bounds(need, want)
	if len(b.waiters) == 0 {
		if n := b.grant(min, max); n > 0 {
			member.add(n)
			b.mu.Unlock()
			return n, nil
		}
	}
	b.arrivals++
	w := &waiter{member: member, arrival: b.arrivals, need: need, want: want, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	var stall <-chan time.Time // nil: no valve
	var timer *time.Timer
	if b.stallAfter > 0 {
		timer = time.NewTimer(b.stallAfter)
		defer timer.Stop()
		stall = timer.C
	}
	for {
		select {
		case <-w.ready:
			return w.granted, nil
		case <-ctx.Done():
			return b.giveUp(ctx, w)
		case <-stall:
		}
		if n, ok := b.valve(w); ok {
			return n, nil
		}
		timer.Reset(b.stallAfter)
	}
}

// giveUp takes w out of the queue for a Take whose ctx ended; room granted
// to it meanwhile goes back.
func (b *Budget) giveUp(ctx context.Context, w *waiter) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		b.put(w.granted)
	default:
		b.remove(w)
		b.serve() // the next one may fit now
	}
	return 0, ctx.Err()
}

// valve grants w room over the limit if it is next in turn and no room
// came back for stallAfter (see OnStall).
func (b *Budget) valve(w *waiter) (int64, bool) {
	b.mu.Lock()
	select {
	case <-w.ready:
		b.mu.Unlock()
		return w.granted, true
	default:
	}
	if time.Since(b.lastGive) < b.stallAfter || b.next() != w || (b.stallWaiting != nil && !b.stallWaiting()) {
		b.mu.Unlock()
		return 0, false
	}
	b.remove(w)
	least, _ := b.bounds(w.need, w.want)
	n := max(least, min(w.want, max(b.made, b.limit)/4))
	b.used += n
	b.changed()
	w.granted = n
	w.member.add(n)
	b.lastGive = time.Now() // the next opening is a whole period away
	close(w.ready)
	f := b.onStall
	b.mu.Unlock()
	if f != nil {
		f(n)
	}
	return n, true
}

// remove takes w out of the queue. Must hold b.mu.
func (b *Budget) remove(w *waiter) {
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			return
		}
	}
}

// Force takes n bytes without waiting, over the limit if it must: what a
// read brought beyond the room taken for it is in memory already.
func (b *Budget) Force(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	b.changed()
}

// Give gives n bytes back.
func (b *Budget) Give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.put(n)
}

// Waiting is how many takes wait for room now.
func (b *Budget) Waiting() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// Used is the bytes in use now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// put gives n bytes back and serves the waiters that fit. Must hold b.mu.
func (b *Budget) put(n int64) {
	b.lastGive = time.Now()
	b.used -= n
	b.changed()
	b.serve()
}

// serve grants the waiters in turn while the next one fits: the one whose
// member got least, then the earliest. The next one waits for room even
// when a later one would fit: a large read is never passed over for ever.
// Must hold b.mu.
func (b *Budget) serve() {
	for len(b.waiters) > 0 {
		w := b.next()
		n := b.grant(b.bounds(w.need, w.want))
		if n == 0 {
			return
		}
		w.granted = n
		w.member.add(n)
		b.remove(w)
		close(w.ready)
	}
}

// next is the waiter whose turn is next. Must hold b.mu, with waiters.
func (b *Budget) next() *waiter {
	next := b.waiters[0]
	for _, w := range b.waiters[1:] {
		if w.before(next) {
			next = w
		}
	}
	return next
}

// before tells whether w's turn comes before o's.
func (w *waiter) before(o *waiter) bool {
	ws, os := w.member.turn(), o.member.turn()
	if ws != os {
		return ws < os
	}
	return w.arrival < o.arrival
}

// turn is what orders m's waits: the room it got so far (0 for none).
// Must hold the budget's mu.
func (m *Member) turn() int64 {
	if m == nil {
		return 0
	}
	return m.served
}

// add counts n bytes granted to m. Must hold the budget's mu.
func (m *Member) add(n int64) {
	if m != nil {
		m.served += n
	}
}

// bounds is what a take that needs need bytes and wants want may be
// granted now, between min and max: at most twice a fair share (or need,
// what the read needs), and not less than half of that (or want) once it
// is free: a reader granted slivers of room would make many small reads
// and fall behind the others. Twice: reads half as many, as evenly (the
// turns keep readers level, byte for byte). Never below the floor
// (SetFloor): many readers of a small budget take turns at reads worth
// their call rather than all read slivers at once. A waiter's bounds are
// taken anew each time it is served: the limit and the readers change.
// Must hold b.mu.
func (b *Budget) bounds(need, want int64) (lo, hi int64) {
	lo, hi = need, want
	if n := int64(len(b.members)); n > 1 {
		share := max(2*b.limit/n, min(b.floor, b.limit/4))
		if hi > share {
			hi = share
			if hi < lo {
				hi = lo
			}
		}
		if lo < share/2 {
			lo = share / 2
			if lo > hi {
				lo = hi
			}
		}
	}
	return clamp(lo, hi)
}

// grant takes between min and max bytes if min fit, or the whole budget
// when nothing is in use, and returns how many; 0 when min does not fit.
// Must hold b.mu.
func (b *Budget) grant(least, most int64) int64 {
	free := b.limit - b.used
	var n int64
	switch {
	case free >= least:
		n = clampTo(free, least, most)
	case b.used == 0:
		n = max(free, 1)
	default:
		return 0
	}
	b.used += n
	b.changed()
	return n
}

func (b *Budget) changed() {
	if b.report != nil {
		b.report(b.used)
	}
}

func clamp(min, max int64) (int64, int64) {
	if min < 1 {
		min = 1
	}
	if max < min {
		max = min
	}
	return min, max
}

// clampTo is free within [min, max].
func clampTo(free, min, max int64) int64 {
	switch {
	case free < min:
		return min
	case free > max:
		return max
	}
	return free
}
