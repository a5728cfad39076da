package membudget

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

func TestTakeGrantsWhatIsFreeWithinMinAndMax(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var peak int64
	b := New(100, func(used int64) { mu.Lock(); peak = max(peak, used); mu.Unlock() })
	ctx := t.Context()
	if n, _ := b.Take(ctx, 10, 60); n != 60 {
		t.Fatalf("took %d of an empty budget of 100 asking 10 to 60, want 60", n)
	}
	if n, _ := b.Take(ctx, 10, 60); n != 40 {
		t.Fatalf("took %d with 40 free asking 10 to 60, want 40", n)
	}
	if b.Used() != 100 || peak != 100 {
		t.Fatalf("used %d, peak %d, want 100", b.Used(), peak)
	}
	b.Give(100)
	// One read must always be possible: a min above the whole budget gets
	// the whole budget once nothing else is in use.
	if n, _ := b.Take(ctx, 500, 500); n != 100 {
		t.Fatalf("took %d asking 500 of an empty budget of 100, want 100", n)
	}
	b.Give(100)
	b.Force(130)
	if b.Used() != 130 {
		t.Fatalf("used %d after forcing 130, want 130", b.Used())
	}
	var nilBudget *Budget
	if n, err := nilBudget.Take(ctx, 1, 7); n != 7 || err != nil {
		t.Fatalf("a nil budget took %d, %v; want 7 at once", n, err)
	}
}

// TestWaitersAreServedInTheOrderTheyCame: room given back goes to the
// reader that waited longest, even when a later one would fit first: no
// shard starves while others read.
func TestWaitersAreServedInTheOrderTheyCame(t *testing.T) {
	t.Parallel()
	b := New(100, nil)
	ctx := t.Context()
	if _, err := b.Take(ctx, 100, 100); err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, b)
	q.take(b, "big", 80)
	q.take(b, "small", 10)
	b.Give(20) // the small one would fit, the big one came first
	select {
	case name := <-q.served:
		t.Fatalf("%s was served with 20 free while big waited first", name)
	case <-time.After(50 * time.Millisecond):
	}
	b.Give(60) // 80 free: the big one only
	q.next("big", "it came first")
	b.Give(10)
	q.next("small", "it came second")
}

// TestAWaiterThatGivesUpLetsTheNextOneIn: a reader that stops waiting
// (its context ends) leaves the queue, and the one behind it is served.
func TestAWaiterThatGivesUpLetsTheNextOneIn(t *testing.T) {
	t.Parallel()
	b := New(100, nil)
	if _, err := b.Take(t.Context(), 90, 90); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() { _, err := b.Take(ctx, 50, 50); gaveUp <- err }()
	waitWaiters(t, b, 1)
	served := make(chan int64, 1)
	go func() { n, _ := b.Take(t.Context(), 10, 10); served <- n }()
	waitWaiters(t, b, 2)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a cancelled wait returned no error")
	}
	if n := <-served; n != 10 {
		t.Fatalf("the next waiter got %d, want 10", n)
	}
	if b.Used() != 100 {
		t.Fatalf("used %d, want 100", b.Used())
	}
}

// queue runs takes of their own size that wait for room, each added once
// the one before it waits, and tells the order they were served in.
type queue struct {
	t       *testing.T
	b       *Budget
	waiting int
	served  chan string
}

func newQueue(t *testing.T, b *Budget) *queue {
	return &queue{t: t, b: b, served: make(chan string, 8)}
}

// take starts a take of n bytes named name, and returns once it waits.
func (q *queue) take(room shard.Room, name string, n int64) {
	q.t.Helper()
	go func() {
		if _, err := room.Take(q.t.Context(), n, n); err != nil {
			q.t.Error(err)
			return
		}
		q.served <- name
	}()
	q.waiting++
	waitWaiters(q.t, q.b, q.waiting)
}

// next checks that the take served next is want.
func (q *queue) next(want, why string) {
	q.t.Helper()
	if got := <-q.served; got != want {
		q.t.Fatalf("%s was served; want %s: %s", got, want, why)
	}
}

func waitWaiters(t *testing.T, b *Budget, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		k := len(b.waiters)
		b.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters after 5 s, want %d", k, n)
		}
	}
}

// TestMembersTakeTurnsByTheRoomTheyGot: among waiting members, the one
// that got least so far is served first, whatever the order they came in;
// a member joining late starts level with the one that got least, not at
// zero.
func TestMembersTakeTurnsByTheRoomTheyGot(t *testing.T) {
	t.Parallel()
	b := New(100, nil)
	ahead, behind := b.Join(), b.Join()
	if n, err := ahead.Take(t.Context(), 50, 50); n != 50 || err != nil {
		t.Fatalf("took %d, %v", n, err)
	}
	if n, err := behind.Take(t.Context(), 10, 10); n != 10 || err != nil {
		t.Fatalf("took %d, %v", n, err)
	}
	b.Force(40) // full
	q := newQueue(t, b)
	q.take(ahead, "ahead", 25)   // came first, got 50
	q.take(behind, "behind", 25) // got 10
	late := b.Join()             // starts at 10, level with behind, after it
	q.take(late, "late", 25)
	b.Give(25)
	q.next("behind", "it got least")
	b.Give(25)
	q.next("late", "it was level with behind when it joined, and came after it")
	b.Give(25)
	q.next("ahead", "it got most")
}

// TestAMemberTakesAboutItsFairShare: with n members sharing the budget a
// take is granted at most twice the limit over n, and waits until at least
// half of that is free: no sliver of room that would make a read of a
// record or two.
func TestAMemberTakesAboutItsFairShare(t *testing.T) {
	t.Parallel()
	b := New(100, nil)
	ms := []*Member{b.Join(), b.Join(), b.Join(), b.Join()}
	ctx := t.Context()
	if n, _ := ms[0].Take(ctx, 1, 1000); n != 50 {
		t.Fatalf("took %d asking up to 1000 of 100 shared by 4, want 50", n)
	}
	b.Force(40) // 10 free
	got := make(chan int64, 1)
	go func() { n, _ := ms[0].Take(ctx, 1, 1000); got <- n }()
	waitWaiters(t, b, 1)
	b.Give(14) // 24 free: under half of 50
	b.Give(1)  // 25: half fits
	if n := <-got; n != 25 {
		t.Fatalf("took %d, want the 25 free once half of twice the share fit", n)
	}
	for _, m := range ms[1:] {
		m.Leave()
	}
	ms[1].Leave() // twice is harmless
	b.Give(b.Used())
	if n, _ := ms[0].Take(ctx, 1, 1000); n != 100 {
		t.Fatalf("alone, took %d, want the whole 100", n)
	}
}

// TestAStalledBudgetLetsTheNextReadThrough: when no room comes back for
// the stall period while a reader waits (an output holding records until
// it gets more), the next in turn is granted its min over the limit, and
// told of; then the valve stays shut for another period.
func TestAStalledBudgetLetsTheNextReadThrough(t *testing.T) {
	t.Parallel()
	b := New(100, nil)
	stalled := make(chan int64, 2)
	var pipelineWaits atomic.Bool
	b.OnStall(50*time.Millisecond, pipelineWaits.Load, func(n int64) { stalled <- n })
	if _, err := b.Take(t.Context(), 100, 100); err != nil {
		t.Fatal(err)
	}
	// The pipeline not asking for records (an output down): no valve.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	if n, err := b.Take(ctx, 30, 60); err == nil {
		t.Fatalf("took %d over the limit while the pipeline was not waiting for records", n)
	}
	cancel()
	pipelineWaits.Store(true)
	start := time.Now()
	n, err := b.Take(t.Context(), 30, 60)
	if err != nil || n != 30 {
		t.Fatalf("took %d, %v; want its min, 30 (more than a quarter of the budget), over the limit", n, err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("let through after %v, before the stall period of 50ms", waited)
	}
	if got := <-stalled; got != 30 || b.Used() != 130 {
		t.Fatalf("told of %d, used %d; want 30 and 130", got, b.Used())
	}
	// Room given back while the next one waits: it is served by turn, not
	// by the valve.
	got := make(chan int64, 1)
	go func() { n, _ := b.Take(t.Context(), 20, 20); got <- n }()
	waitWaiters(t, b, 1)
	b.Give(50)
	if n := <-got; n != 20 || b.Used() != 100 {
		t.Fatalf("took %d, used %d; want 20 and 100", n, b.Used())
	}
	select {
	case n := <-stalled:
		t.Fatalf("the valve opened again (%d) for a take served by turn", n)
	default:
	}
}

// TestOnMembersCountsEveryJoinAndLeave: the hook hears the count after each
// change, once for a member that leaves twice.
func TestOnMembersCountsEveryJoinAndLeave(t *testing.T) {
	b := New(1<<20, nil)
	var got []int
	b.OnMembers(func(n int) { got = append(got, n) })
	m1, m2 := b.Join(), b.Join()
	m1.Leave()
	m1.Leave()
	m2.Leave()
	if want := []int{1, 2, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// TestSetLimitTakesEffectAsRoomComesBack: a smaller limit keeps the room
// already taken and lets no one in until use is under it; a larger one
// lets a waiter in at once.
func TestSetLimitTakesEffectAsRoomComesBack(t *testing.T) {
	ctx := context.Background()
	b := New(1000, nil)
	if n, _ := b.Take(ctx, 600, 600); n != 600 {
		t.Fatalf("took %d, want 600", n)
	}
	b.SetLimit(500)
	got := make(chan int64)
	go func() {
		n, _ := b.Take(ctx, 100, 100)
		got <- n
	}()
	waitWaiters(t, b, 1)
	b.Give(100) // 500 used: still no room under 500
	select {
	case n := <-got:
		t.Fatalf("granted %d with 500 of a 500 limit in use", n)
	case <-time.After(20 * time.Millisecond):
	}
	b.SetLimit(700)
	if n := <-got; n != 100 {
		t.Fatalf("granted %d, want 100", n)
	}
	if b.Limit() != 700 || b.Used() != 600 {
		t.Fatalf("limit %d used %d, want 700 and 600", b.Limit(), b.Used())
	}
}

// TestFloorKeepsReadsWorthTheirCall: with many readers sharing a small
// budget, a take's share is not cut below the floor, nor the floor above a
// quarter of the limit.
func TestFloorKeepsReadsWorthTheirCall(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		limit, floor, want int64
	}{
		{10_000, 0, 200},       // 100 readers: twice a fair share, 200
		{10_000, 1_000, 1_000}, // the floor
		{10_000, 5_000, 2_500}, // the floor, at most a quarter
	} {
		b := New(c.limit, nil)
		b.SetFloor(c.floor)
		for range 100 {
			b.Join()
		}
		if n, _ := b.Take(ctx, 1, c.limit); n != c.want {
			t.Errorf("limit %d floor %d: took %d, want %d", c.limit, c.floor, n, c.want)
		}
	}
}

// TestTheValveOpensByTheBudgetAsMade: a budget whose limit SetLimit cut
// (many shards' own state) still lets a quarter of what it was made with
// through its valve, not a quarter of what is left, nor only a share.
func TestTheValveOpensByTheBudgetAsMade(t *testing.T) {
	t.Parallel()
	b := New(400, nil)
	b.OnStall(20*time.Millisecond, nil, nil)
	var members []*Member
	for range 16 {
		members = append(members, b.Join())
	}
	b.SetLimit(40)
	if _, err := members[0].Take(t.Context(), 40, 40); err != nil {
		t.Fatal(err)
	}
	if n, err := members[1].Take(t.Context(), 1, 1000); err != nil || n != 100 {
		t.Fatalf("the valve let %d through, %v; want 100, a quarter of 400", n, err)
	}
}

// TestAWaiterIsServedByTheLimitNow: a waiter's bounds are taken anew when
// its turn comes: after the limit shrank, it is served once its share of
// the new limit is free, not only once nothing else is in use.
func TestAWaiterIsServedByTheLimitNow(t *testing.T) {
	t.Parallel()
	b := New(1000, nil)
	m1, m2 := b.Join(), b.Join()
	if n, _ := m1.Take(t.Context(), 1, 1000); n != 1000 {
		t.Fatalf("took %d, want 1000", n)
	}
	got := make(chan int64, 1)
	go func() {
		n, _ := m2.Take(t.Context(), 1, 1000) // at least 500 of 1000
		got <- n
	}()
	waitWaiters(t, b, 1)
	b.SetLimit(400) // now at least 200
	b.Give(700)
	select {
	case n := <-got:
		t.Fatalf("granted %d with 300 of 400 in use", n)
	case <-time.After(20 * time.Millisecond):
	}
	b.Give(100)
	if n := <-got; n != 200 {
		t.Fatalf("granted %d, want 200: half a share of the limit now", n)
	}
}
