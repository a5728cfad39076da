package leasecoord

import (
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// TestCommitForgetsAnAskItsWriteShowsGone: b asks for a's lease and
// withdraws; a's next checkpoint write comes back without the ask, and a
// forgets it (commit.go calls leaseView.askGone). A later ask by the same
// process is then a new ask, first seen when seen, not the old one whose
// asker's item a read before (TestLeaseAskAgainBySameProcessIsANewAsk).
func TestCommitForgetsAnAskItsWriteShowsGone(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	a := storeCoordinator(t, m, "a", time.Minute, "s0")
	a.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, a, "s0")
	askAsLiveInstance(t, m, "s0", "b", a)
	if _, ok := a.view.asks["s0"]; !ok {
		t.Fatal("a did not see b's ask")
	}
	if err := m.Withdraw(t.Context(), itemOf(t, m, "s0"), "b"); err != nil {
		t.Fatal(err)
	}
	g.Acked(pos(2))
	if err := a.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if it := itemOf(t, m, "s0"); it.Checkpoint.Position == nil || *it.Checkpoint.Position != pos(2) {
		t.Fatalf("a's checkpoint was not written: %+v", it)
	}
	a.view.mu.Lock()
	_, ok := a.view.asks["s0"]
	a.view.mu.Unlock()
	if ok {
		t.Fatal("a's write came back without b's ask, and a still remembers it")
	}
}

// TestCommitHandoverIsInTheViewAtItsAnswer: a hands its lease over to b;
// its view holds the item as the handover wrote it, changed at the write's
// answer (commit.go calls leaseView.released), rather than as a's last scan
// showed it: if the scans fail from then on, the lease handed over still
// expires a lease period after the handover should b not take it up
// (TestLeaseHandedOverExpiresFromTheHandover).
func TestCommitHandoverIsInTheViewAtItsAnswer(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	a := storeCoordinator(t, m, "a", time.Minute, "s0")
	a.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, a, "s0")
	askAsLiveInstance(t, m, "s0", "b", a)
	a.Cycle(t.Context(), everyShard) // the ask is seen: the reader stops
	g.Acked(pos(3))
	before := a.clock.Now()
	g.Stopped(t.Context(), settledNow) // the handover
	if it := itemOf(t, m, "s0"); it.Owner != "b" {
		t.Fatalf("not handed over: %+v", it)
	}
	a.view.mu.Lock()
	it, since := a.view.items["s0"], a.view.since["s0"]
	_, asked := a.view.asks["s0"]
	a.view.mu.Unlock()
	if it.Owner != "b" || since.Before(before) {
		t.Fatalf("a's view after its handover: owner %q changed at %v; want b's, changed at the answer (after %v)", it.Owner, since, before)
	}
	if asked {
		t.Fatal("a's view still holds b's ask, answered by the handover")
	}
}
