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

// TestHandoverAnswerLostReadBackIsAHandover: a hands s0 over to b, and the
// handover lands with the last checkpoint, but its answer is lost. a's
// next write of s0 finds the item b's and reads it back: one counter on,
// b's process, with the checkpoint only the handover wrote. That is a's
// handover, not a take: the lease went to b from then on, and once b's
// process is known dead before taking it up, s0, which grants nobody,
// expires to a at once (see TestLeaseHandedToAProcessKnownDeadExpires).
// (Before, a counted s0 taken by another instance, and waited a lease
// period from its next scan: b was paused, the instance the plan gave s0
// to failed its reads, and s0 was unread for three lease periods. Found
// by the simulation: seed 4026.)
func TestHandoverAnswerLostReadBackIsAHandover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := lease.NewMemory()
	st := &lostAnswers{Store: m}
	a := storeCoordinator(t, st, "a", time.Minute, "s0")
	a.Cycle(ctx, everyShard)
	g, _ := mustGrant(t, a, "s0")
	g.Acked(pos(3))
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	askAsLiveInstance(t, m, "s0", "b", a)
	a.Cycle(ctx, everyShard) // the ask is seen: the reader stops
	g.Acked(pos(4))
	st.loseNext.Store(true)
	g.Stopped(ctx, settledNow) // the handover lands; its answer is lost
	handed := itemOf(t, m, "s0")
	if handed.Owner != "b" || handed.Checkpoint.Position == nil || *handed.Checkpoint.Position != pos(4) {
		t.Fatalf("item after the handover %+v, want b's at 4", handed)
	}
	_ = a.Commit(ctx) // the handover again: the item is b's, read back
	if state, held := a.book.stateOf("s0"); held {
		t.Fatalf("a still holds s0, %v", state)
	}
	now := a.clock.Now()
	a.view.forget(lease.Worker{ID: "b", Nonce: "nb"}, now)
	if !a.view.expired(handed, now) {
		t.Errorf("s0, handed by a to b's process, known dead before it took s0 up, is not expired to a")
	}
}
