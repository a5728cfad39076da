package leasecoord

// What an instance counts as expired and alive (leaseView), against an
// in-memory table.

import (
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// TestLeaseHandedOverAndNotTakenUpExpires: a hands s0 over to b, which
// asked. b takes up a lease handed to it only in a cycle, after a scan;
// its scans fail for a while (throttled), while its heartbeat, a single
// small write, succeeds. b's heartbeat lists the leases b holds, and s0 is
// not among them: to a, s0 expires a lease period after its handover, and
// a takes it back, while b's scans still fail. (Before, every heartbeat of
// an owner renewed every lease of its name: s0, owned by b in the table
// but in no book, was read by nobody and never expired for as long as b's
// scans failed.)
func TestLeaseHandedOverAndNotTakenUpExpires(t *testing.T) {
	t.Parallel()
	const period = 300 * time.Millisecond
	m := lease.NewMemory()
	a := storeCoordinator(t, m, "a", period, "s0")
	skipStartWait(a)
	a.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, a, "s0")
	bt := &failingScans{Store: m}
	b := storeCoordinator(t, bt, "b", period)
	// b lives, as a sees: two heartbeats a scan apart.
	for range 2 {
		time.Sleep(period / 3)
		_ = b.Commit(t.Context())
		a.Cycle(t.Context(), everyShard)
	}
	if !a.view.live(time.Now())["b"] {
		t.Fatal("b is not alive to a")
	}
	bt.fail.Store(true)
	// b asks for s0 (as its balance would, from its last good scan).
	if err := m.Ask(t.Context(), itemOf(t, m, "s0"), "b", b.nonce); err != nil {
		t.Fatal(err)
	}
	a.Cycle(t.Context(), everyShard) // a sees the ask
	time.Sleep(period / 3)
	_ = b.Commit(t.Context())        // b alive since its ask (its heartbeat succeeds)
	a.Cycle(t.Context(), everyShard) // its reader stops
	g.Stopped(t.Context(), settledNow)
	if it := itemOf(t, m, "s0"); it.Owner != "b" {
		t.Fatalf("item %+v, want handed over to b", it)
	}
	handed := time.Now()
	for time.Since(handed) < 3*period {
		time.Sleep(period / 6)
		_ = a.Commit(t.Context())
		a.Cycle(t.Context(), everyShard)
		_ = b.Commit(t.Context()) // b's heartbeat succeeds
		b.Cycle(t.Context(), everyShard)
	}
	_, aHolds := a.book.stateOf("s0")
	_, bHolds := b.book.stateOf("s0")
	if bHolds {
		t.Fatal("b took up s0 while its scans failed")
	}
	if it := itemOf(t, m, "s0"); !aHolds {
		t.Errorf("s0 unread for %v (%.1f lease periods) since its handover: owned by b in the table (%+v), in neither book, and not expired to a",
			time.Since(handed).Round(time.Millisecond), float64(time.Since(handed))/float64(period), it)
	}
}
