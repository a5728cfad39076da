package leasecoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// The transitions of a held lease (leaseBook), driven through the lease
// coordinator against an in-memory table (lease.Memory): no emulator, no
// stream. Each test names the guarantee it checks.

const testARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"

// stopRecorder is a reader's cancel function that records its cause.
type stopRecorder struct {
	mu    sync.Mutex
	cause error
}

func (s *stopRecorder) stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause == nil {
		s.cause = err
	}
}

func (s *stopRecorder) get() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// storeCoordinator loads a coordinator of instance me on the store st and
// pins the shards (free items at TRIM_HORIZON).
func storeCoordinator(t *testing.T, st lease.Store, me string, period time.Duration, shards ...string) *leaseCoordinator {
	t.Helper()
	return clockedCoordinator(t, st, nil, me, period, shards...)
}

// clockedCoordinator is storeCoordinator living by clock (nil: the wall
// clock).
func clockedCoordinator(t *testing.T, st lease.Store, clock Clock, me string, period time.Duration, shards ...string) *leaseCoordinator {
	t.Helper()
	res := service.MockResources()
	lc := newLeaseCoordination(st, Options{InstanceID: me, LeasePeriod: period, StealLimit: 4, Clock: clock})
	c := lc.stream(testStream(res), coord.NewPositions(checkpoint.Stream{}))
	first, err := c.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var infos []coord.Shard
	for i, id := range shards {
		infos = append(infos, coord.Shard{ID: id, StartSeq: fmt.Sprint(i + 1)})
	}
	if err := c.Pin(t.Context(), infos, first.Start, first.Due); err != nil {
		t.Fatal(err)
	}
	return c
}

func everyShard(string) bool { return true }

// loggedCoordinator loads a coordinator of instance me on m whose logs go
// to the returned log, with no shard pinned yet.
func loggedCoordinator(t *testing.T, m *lease.Memory, me string) (*leaseCoordinator, *syncLog, coord.FirstPin) {
	t.Helper()
	logs := &syncLog{}
	res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil)))))
	lc := newLeaseCoordination(m, Options{InstanceID: me, LeasePeriod: time.Minute, StealLimit: 4})
	c := lc.stream(testStream(res), coord.NewPositions(checkpoint.Stream{}))
	first, err := c.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c, logs, first
}

// skipStartWait ends the wait of a coordinator just started for the
// instances it sees for the first time (leaseView.settling).
func skipStartWait(c *leaseCoordinator) {
	c.view.mu.Lock()
	defer c.view.mu.Unlock()
	c.view.started = c.clock.Now().Add(-c.period)
}

func testStream(res *service.Resources) coord.Stream {
	return coord.Stream{Name: "orders", ARN: testARN, Log: res.Logger(), Metrics: coord.NewMetrics(res.Metrics()),
		StartFor: func(bool) checkpoint.Start { return checkpoint.Start{Kind: "TRIM_HORIZON"} }}
}

func pos(n int) checkpoint.Position { return checkpoint.Position{Sequence: strconv.Itoa(n)} }

// mustGrant acquires a shard's grant.
func mustGrant(t *testing.T, c *leaseCoordinator, shardID string) (*leaseGrant, *stopRecorder) {
	t.Helper()
	rec := &stopRecorder{}
	g, ok := c.Acquire(shardID, rec.stop)
	if !ok {
		st, held := c.book.stateOf(shardID)
		t.Fatalf("no grant for %s (lease %v, in the book %v)", shardID, st, held)
	}
	return g.(*leaseGrant), rec
}

// beatOf returns the beat of instance id in the roster of the test
// stream (zero when it has none).
func beatOf(t *testing.T, m *lease.Memory, id string) lease.Beat {
	t.Helper()
	p, err := m.Poll(t.Context(), testARN)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Beats {
		if b.ID == id {
			return b
		}
	}
	return lease.Beat{}
}

func itemOf(t *testing.T, m *lease.Memory, shardID string) lease.Shard {
	t.Helper()
	it, ok, err := m.Get(t.Context(), testARN, shardID)
	if err != nil || !ok {
		t.Fatalf("item %s: %v %v", shardID, ok, err)
	}
	return it
}

var settledNow = func(context.Context) error { return nil }

// askAsLiveInstance writes the worker item of instance by (process "n"+by)
// twice, each seen by the watchers, its ask for the lease of shardID, seen
// by the watchers, and the worker item once more, seen by them: by asked,
// and is alive to them since.
func askAsLiveInstance(t *testing.T, m *lease.Memory, shardID, by string, watchers ...*leaseCoordinator) {
	t.Helper()
	beatAlive(t, m, by, watchers...)
	if err := m.Ask(t.Context(), itemOf(t, m, shardID), by, "n"+by); err != nil {
		t.Fatal(err)
	}
	for _, w := range watchers {
		w.view.askSeen(itemOf(t, m, shardID), w.clock.Now().Add(-time.Millisecond))
	}
	beatAlive(t, m, by, watchers...)
}

// beatAlive moves the worker item of instance by (process "n"+by) twice,
// each seen by the watchers: by is alive to them.
func beatAlive(t *testing.T, m *lease.Memory, by string, watchers ...*leaseCoordinator) {
	t.Helper()
	for range 2 {
		if err := m.Heartbeat(t.Context(), testARN, by, lease.Presence{Nonce: "n" + by}, true); err != nil {
			t.Fatal(err)
		}
		sc, err := m.Scan(t.Context(), testARN)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range watchers {
			w.view.observe(sc, w.clock.Now())
		}
	}
}

// TestLeaseFencedThenRenewedResumesAfterLastAck: the table is unreachable
// for longer than a lease period while a batch is in the pipeline. The
// reader is fenced (stopped), the batch's acknowledgement, arriving after
// the fence, still counts, and once the renewal succeeds at the same
// counter the next reader starts after it: nothing is read twice. (Before
// the redesign the fence dropped the reader's generation, so the late
// acknowledgement was lost and the next reader read the batch again.)
func TestLeaseFencedThenRenewedResumesAfterLastAck(t *testing.T) {
	t.Parallel()
	const period = 300 * time.Millisecond
	clock := newStepClock()
	m := lease.NewMemory()
	c := clockedCoordinator(t, m, clock, "solo", period, "s0")
	c.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, c, "s0")
	g.Acked(pos(5))
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	m.FailAll(errors.New("injected: connection refused"))
	clock.advance(period)
	_ = c.Commit(t.Context())
	if st, _ := c.book.stateOf("s0"); st != leaseFenced {
		t.Fatalf("lease %v after a lease period without renewal, want fenced", st)
	}
	if !errors.Is(rec.get(), errLeaseExpired) {
		t.Fatalf("reader stopped with %v, want %v", rec.get(), errLeaseExpired)
	}
	if !g.Until().Before(clock.Now()) {
		t.Fatal("a fenced reader may still hand out records")
	}
	g.Acked(pos(7)) // handed out before the fence, acknowledged after it
	if _, ok := c.Acquire("s0", func(error) {}); ok {
		t.Fatal("a fenced lease was granted to a second reader")
	}
	g.Stopped(t.Context(), settledNow)

	m.FailAll(nil)
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.book.stateOf("s0"); st != leaseHeld {
		t.Fatalf("lease %v after a renewal at the same counter, want held", st)
	}
	if it := itemOf(t, m, "s0"); it.Checkpoint.Position == nil || *it.Checkpoint.Position != pos(7) {
		t.Fatalf("item checkpoint %v, want 7 (the acknowledgement after the fence)", it.Checkpoint.Position)
	}
	g2, _ := mustGrant(t, c, "s0")
	if p := g2.Start().Position; p == nil || *p != pos(7) {
		t.Fatalf("the next reader starts at %v, want after 7", p)
	}
}

// TestLeaseTakenElsewhereIsLost: a lease another instance took (its counter
// higher) is lost at the next scan: the reader stops at once, and what it
// acknowledges later moves nothing.
func TestLeaseTakenElsewhereIsLost(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, c, "s0")
	if _, err := m.Take(t.Context(), itemOf(t, m, "s0"), "b", "nb"); err != nil {
		t.Fatal(err)
	}
	c.Cycle(t.Context(), everyShard)
	if !errors.Is(rec.get(), errLeaseLost) {
		t.Fatalf("reader stopped with %v, want %v", rec.get(), errLeaseLost)
	}
	g.Acked(pos(9))
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if it := itemOf(t, m, "s0"); it.Owner != "b" || it.Checkpoint.Position != nil {
		t.Fatalf("item %+v: the loser wrote after losing", it)
	}
	if _, ok := c.Acquire("s0", func(error) {}); ok {
		t.Fatal("a lost lease was granted")
	}
}

// TestLeaseHandoverWritesTheLastAckOnceSettled: an instance asks; the
// holder stops its reader, and hands the lease over with the last
// acknowledged position as soon as what the reader handed out is settled,
// not a lease period later.
func TestLeaseHandoverWritesTheLastAckOnceSettled(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, c, "s0")
	g.Acked(pos(3))
	// b is alive to a. The commit's write of the acknowledged position
	// answers with the ask.
	askAsLiveInstance(t, m, "s0", "b", c)
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rec.get(), errHandoff) {
		t.Fatalf("reader stopped with %v, want %v", rec.get(), errHandoff)
	}
	g.Acked(pos(4)) // the last batch handed out
	g.Stopped(t.Context(), settledNow)
	it := itemOf(t, m, "s0")
	if it.Owner != "b" || it.Checkpoint.Position == nil || *it.Checkpoint.Position != pos(4) {
		t.Fatalf("item after the handover %+v, want owner b at 4", it)
	}
	if _, held := c.book.stateOf("s0"); held {
		t.Fatal("a lease handed over is still in the book")
	}
}

// TestLeaseAskOfADeadInstanceIsCleared: an ask of an instance whose worker
// item did not move for a lease period is removed by the holder's next
// write, and the lease stays.
func TestLeaseAskOfADeadInstanceIsCleared(t *testing.T) {
	t.Parallel()
	const period = 200 * time.Millisecond
	clock := newStepClock()
	m := lease.NewMemory()
	if err := m.Heartbeat(t.Context(), testARN, "dead", lease.Presence{Nonce: "nd"}, true); err != nil {
		t.Fatal(err)
	}
	c := clockedCoordinator(t, m, clock, "a", period, "s0")
	skipStartWait(c)
	c.Cycle(t.Context(), everyShard)
	if err := m.Ask(t.Context(), itemOf(t, m, "s0"), "dead", "nd"); err != nil {
		t.Fatal(err)
	}
	clock.advance(period)
	c.Cycle(t.Context(), everyShard) // sees the ask of an instance dead for a period
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if it := itemOf(t, m, "s0"); it.Owner != "a" || it.HandoffTo != "" {
		t.Fatalf("item %+v, want a's with the ask removed", it)
	}
}

// TestLeaseWithdrawnAskKeepsTheLease: the asker withdraws (it is stopping)
// before the handover is written: the lease stays, held, and is read on.
func TestLeaseWithdrawnAskKeepsTheLease(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, c, "s0")
	askAsLiveInstance(t, m, "s0", "b", c)
	c.Cycle(t.Context(), everyShard) // the ask is seen: handing over
	if st, _ := c.book.stateOf("s0"); st != leaseHandingOver {
		t.Fatalf("lease %v, want handing over", st)
	}
	if err := m.Withdraw(t.Context(), itemOf(t, m, "s0"), "b"); err != nil {
		t.Fatal(err)
	}
	g.Stopped(t.Context(), settledNow)
	if st, _ := c.book.stateOf("s0"); st != leaseHeld {
		t.Fatalf("lease %v after the ask was withdrawn, want held", st)
	}
	if it := itemOf(t, m, "s0"); it.Owner != "a" {
		t.Fatalf("item %+v, want still a's", it)
	}
	mustGrant(t, c, "s0")
}

// TestLeaseResetDropsEveryLease: a stream found deleted and created again
// drops every held lease and stops its reader before anything of the new
// stream is read; the replaced items continue the old counters, so a scan
// of another holder sees them taken.
func TestLeaseResetDropsEveryLease(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, c, "s0")
	before := itemOf(t, m, "s0").Counter
	if err := c.Reset(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rec.get(), errLeaseDropped) {
		t.Fatalf("reader stopped with %v, want %v", rec.get(), errLeaseDropped)
	}
	g.Acked(pos(8)) // of the old stream: counts nowhere
	if err := c.Pin(t.Context(), []coord.Shard{{ID: "s0", StartSeq: "100"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, true); err != nil {
		t.Fatal(err)
	}
	it := itemOf(t, m, "s0")
	if it.Owner != "" || it.Counter <= before || it.Checkpoint.ShardStart != "100" || it.Checkpoint.Position != nil {
		t.Fatalf("new item %+v, want free, counter above %d, starting at 100", it, before)
	}
	if _, ok := c.Acquire("s0", func(error) {}); ok {
		t.Fatal("a lease of the old stream was granted for the new one")
	}
}

// TestLeaseEndReleasesAndCountsForChildren: a shard read to its end stores
// SHARD_END and frees its lease in one write; its end is then durable.
func TestLeaseEndReleasesAndCountsForChildren(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, c, "s0")
	last := pos(12)
	if err := g.Ended(t.Context(), &last); err != nil {
		t.Fatal(err)
	}
	if it := itemOf(t, m, "s0"); !it.Checkpoint.Ended || it.Owner != "" {
		t.Fatalf("item %+v, want ended and free", it)
	}
	if !c.pos.EndSaved("s0") {
		t.Fatal("a stored end does not count for the children")
	}
}

// TestStaleWorkerItemsDoNotShrinkTheShare: 50 worker items of crashed
// instances, never moving: an instance alone takes every free shard at its
// first cycle, and removes the items once they did not move for a lease
// period. (Before the redesign a worker seen for the first time counted as
// alive for a lease period, so the share was 1 of 10, and the items were
// never removed.)
func TestStaleWorkerItemsDoNotShrinkTheShare(t *testing.T) {
	t.Parallel()
	const period = 300 * time.Millisecond
	clock := newStepClock()
	m := lease.NewMemory()
	for i := range 50 {
		if err := m.Heartbeat(t.Context(), testARN, fmt.Sprintf("crashed-%d", i), lease.Presence{Nonce: "n"}, true); err != nil {
			t.Fatal(err)
		}
	}
	var shards []string
	for i := range 10 {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	c := clockedCoordinator(t, m, clock, "me", period, shards...)
	// Just started, it waits for the instances it sees for the first time
	// to move: half a lease period at most.
	c.Cycle(t.Context(), everyShard)
	if n := c.book.count(); n != 0 {
		t.Fatalf("just started next to 50 worker items that did not move yet, it took %d shards at once", n)
	}
	clock.advance(period/2 + period/10)
	c.Cycle(t.Context(), everyShard)
	if n := c.book.count(); n != 10 {
		t.Fatalf("alone next to 50 stale worker items, it took %d of 10 free shards half a lease period after its start", n)
	}
	clock.advance(period)
	c.Cycle(t.Context(), everyShard)
	if ws := m.Workers(); len(ws) != 1 || ws[0].ID != "me" {
		t.Fatalf("worker items after a lease period: %d, want only me's", len(ws))
	}
}

// TestDuplicateInstanceIDIsRefused: a second process started with the
// instance_id of a running one is refused at load, loudly; the first reads
// on.
func TestDuplicateInstanceIDIsRefused(t *testing.T) {
	t.Parallel()
	const period = 300 * time.Millisecond
	m := lease.NewMemory()
	first := storeCoordinator(t, m, "same", period, "s0")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // the first process lives: its commits beat
		for ctx.Err() == nil {
			first.saveMu.Lock()
			_ = first.heartbeat(ctx)
			first.saveMu.Unlock()
			time.Sleep(period / 6)
		}
	}()
	res := service.MockResources()
	lc := newLeaseCoordination(m, Options{InstanceID: "same", LeasePeriod: period, StealLimit: 4})
	second := lc.stream(testStream(res), coord.NewPositions(checkpoint.Stream{}))
	_, err := second.Load(t.Context())
	if err == nil {
		t.Fatal("a second process with a running instance's instance_id was not refused")
	}
	t.Log(err)
}

// TestLeaseDeleteOfAGoneShardIsRetried: the item of a finished shard gone
// past the retention period is deleted at the next cycle; a delete that
// fails is tried again at the one after (it was forgotten before).
func TestLeaseDeleteOfAGoneShardIsRetried(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0", "s1")
	c.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, c, "s0")
	if err := g.Ended(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	c.Prune(map[string]coord.Shard{"s1": {ID: "s1", StartSeq: "2"}}) // s0 is gone
	m.Fail("Delete", errors.New("injected: throttled"))
	c.Cycle(t.Context(), everyShard)
	if _, ok, _ := m.Get(t.Context(), testARN, "s0"); !ok {
		t.Fatal("deleted while deletes fail")
	}
	m.Fail("Delete", nil)
	c.Cycle(t.Context(), everyShard)
	if _, ok, _ := m.Get(t.Context(), testARN, "s0"); ok {
		t.Fatal("the item of a finished shard gone past the retention period was not deleted after a failed delete")
	}
}

// TestLeaseOfAnotherStreamUnderTheSameIDIsNotTaken: another instance found
// the stream deleted and created again and replaced the shard's item (it
// starts elsewhere now); this instance, which still knows the old stream,
// does not take it. Before the fix it did, read the new shard, then found
// the recreate itself, dropped the lease and let the records it had handed
// out since its last checkpoint be read again.
func TestLeaseOfAnotherStreamUnderTheSameIDIsNotTaken(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	if err := m.Replace(t.Context(), lease.Shard{Stream: testARN, ShardID: "s0", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, ShardStart: "100"}}, "1"); err != nil {
		t.Fatal(err)
	}
	c.Cycle(t.Context(), everyShard)
	if n := c.book.count(); n != 0 {
		t.Fatalf("took %d leases of a stream it has not found created again", n)
	}
	if it := itemOf(t, m, "s0"); it.Owner != "" {
		t.Fatalf("item %+v, want free", it)
	}
}

// TestMalformedLeaseItemIsReportedNotTaken: a shard item whose
// leaseCounter was stored as the string "abc" is neither taken nor
// overwritten; it is reported at ERROR with the table, the item, the
// attribute and `checkpoint set --force`, once (not at every cycle) until it
// changes, and counted; the other shard is read; once the item is set again
// the shard is taken. Before, the counter read as 0, every take failed
// "another instance took the lease first" at debug, once a cycle, for ever.
func TestMalformedLeaseItemIsReportedNotTaken(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c, logs, first := loggedCoordinator(t, m, "a")
	shards := []coord.Shard{{ID: "s0", StartSeq: "1"}, {ID: "s1", StartSeq: "2"}}
	if err := c.Pin(t.Context(), shards, first.Start, first.Due); err != nil {
		t.Fatal(err)
	}
	key := lease.ShardKey(testARN, "s0")
	broken := map[string]types.AttributeValue{
		"leaseKey": &types.AttributeValueMemberS{Value: key}, "kind": &types.AttributeValueMemberS{Value: "shard"},
		"streamArn": &types.AttributeValueMemberS{Value: testARN}, "shardId": &types.AttributeValueMemberS{Value: "s0"},
		"leaseCounter": &types.AttributeValueMemberS{Value: "abc"}, "startKind": &types.AttributeValueMemberS{Value: "TRIM_HORIZON"},
	}
	m.SetItem(broken)
	for range 3 {
		c.Cycle(t.Context(), everyShard)
	}
	if _, held := c.book.stateOf("s1"); !held {
		t.Fatal("the well-formed shard s1 was not taken")
	}
	if _, held := c.book.stateOf("s0"); held {
		t.Fatal("the malformed shard s0 was taken")
	}
	var reports []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "shard s0: not read") {
			reports = append(reports, l)
		}
	}
	if len(reports) != 1 {
		t.Fatalf("reported %d times in 3 cycles, want once:\n%s", len(reports), logs.String())
	}
	for _, want := range []string{"level=ERROR", `lease table \"memory\"`, "item " + key, "leaseCounter", `S \"abc\"`, "expected N", "checkpoint set --table memory --stream orders --shard s0 --force"} {
		if !strings.Contains(reports[0], want) {
			t.Errorf("the report does not name %q: %s", want, reports[0])
		}
	}
	if raw := m.Items(); len(raw) != 2 {
		t.Fatalf("items %+v", raw)
	}
	if _, ok, err := m.Get(t.Context(), testARN, "s0"); err == nil || ok {
		t.Fatalf("the malformed item was overwritten (ok %v, err %v)", ok, err)
	}

	// A change of the item is reported again.
	broken["leaseCounter"] = &types.AttributeValueMemberS{Value: "abd"}
	m.SetItem(broken)
	c.Cycle(t.Context(), everyShard)
	if n := strings.Count(logs.String(), "shard s0: not read"); n != 2 {
		t.Fatalf("a changed item reported %d times in all, want 2", n)
	}

	// What `checkpoint set --force` writes: the shard is taken.
	sc, err := m.Scan(t.Context(), testARN)
	if err != nil || len(sc.Broken) != 1 {
		t.Fatalf("scan: broken %+v, %v", sc.Broken, err)
	}
	if err := m.ReplaceMalformed(t.Context(), sc.Broken[0], &lease.Shard{Stream: testARN, ShardID: "s0", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, ShardStart: "1"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c.Cycle(t.Context(), everyShard)
	}
	if _, held := c.book.stateOf("s0"); !held {
		t.Fatal("s0 set again was not taken")
	}
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestLeaseEndOnAnOpenShardIsReported: a shard item that says SHARD_END for
// a shard the listing shows open is reported at ERROR with the fix, and
// counted. Before, the item was skipped as a finished shard, every cycle,
// and the shard's records were never read, with nothing logged.
func TestLeaseEndOnAnOpenShardIsReported(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c, logs, first := loggedCoordinator(t, m, "a")
	listed := map[string]coord.Shard{"s0": {ID: "s0", StartSeq: "1", Listed: true}}
	if err := c.Pin(t.Context(), []coord.Shard{listed["s0"]}, first.Start, first.Due); err != nil {
		t.Fatal(err)
	}
	it := itemOf(t, m, "s0")
	if err := m.Overwrite(t.Context(), lease.Shard{Stream: testARN, ShardID: "s0", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Ended: true, ShardStart: "1"}}, &it); err != nil {
		t.Fatal(err)
	}
	// A listing taken before the end was seen proves nothing (the shard
	// may have ended since); one taken after it does.
	c.Prune(listed)
	c.Cycle(t.Context(), everyShard)
	if n := strings.Count(logs.String(), "shard s0: not read"); n != 0 {
		t.Fatalf("reported against a listing older than the end:\n%s", logs.String())
	}
	c.Prune(listed)
	c.Cycle(t.Context(), everyShard)
	c.Cycle(t.Context(), everyShard)
	if n := strings.Count(logs.String(), "shard s0: not read"); n != 1 {
		t.Fatalf("reported %d times in 2 cycles, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "SHARD_END), but the service lists it open") || !strings.Contains(logs.String(), "checkpoint set --table memory --stream orders --shard s0 --force") {
		t.Fatalf("the report does not say what is wrong and the fix:\n%s", logs.String())
	}
}

// TestLeaseHandoverAfterAConcurrentRenewalIsNotLost: the reader of a lease
// being handed over settles while a commit renews that lease. The handover
// is built after the renewal (under the same lock), so it carries the
// renewal's counter: the lease is handed over, not taken for lost while
// this instance still owns it. (Built before, it carried the old counter,
// failed, and the holder dropped a lease it owned, then took it back from
// its older stored checkpoint and read again what it had acknowledged.)
func TestLeaseHandoverAfterAConcurrentRenewalIsNotLost(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	c := storeCoordinator(t, m, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, c, "s0")
	g.Acked(pos(3))
	askAsLiveInstance(t, m, "s0", "b", c)
	c.Cycle(t.Context(), everyShard) // the ask is seen: the reader stops
	if st, _ := c.book.stateOf("s0"); st != leaseHandingOver {
		t.Fatalf("lease %v, want handing over", st)
	}

	// A write of s0 (the reader still settling) is built and not yet made
	// when the reader settles.
	c.saveMu.Lock()
	c.book.mu.Lock()
	h := c.book.held["s0"]
	renewal := []leaseWrite{{h: h, counter: h.counter, w: lease.Write{KeepAsked: true}}}
	c.book.mu.Unlock()
	g.Acked(pos(4))
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Stopped(t.Context(), settledNow)
	}()
	// Give the settled reader the chance to build its handover early (it
	// must not: it waits for the commit).
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		c.book.mu.Lock()
		detached := c.book.held["s0"].reader == nil
		c.book.mu.Unlock()
		if detached {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.writeAll(t.Context(), renewal); err != nil {
		t.Fatal(err)
	}
	c.saveMu.Unlock()
	<-done

	it := itemOf(t, m, "s0")
	if it.Owner != "b" || it.Checkpoint.Position == nil || *it.Checkpoint.Position != pos(4) {
		t.Fatalf("item after the handover %+v, want owner b at 4", it)
	}
	if _, held := c.book.stateOf("s0"); held {
		t.Fatal("a lease handed over is still in the book")
	}
}

// holderAndWatcher starts instance a, which takes shard s0 and grants a
// reader, and instance b on the same table.
func holderAndWatcher(t *testing.T, clock *stepClock, period time.Duration) (*lease.Memory, *leaseCoordinator, *leaseCoordinator, *leaseGrant, *stopRecorder) {
	t.Helper()
	m := lease.NewMemory()
	a := clockedCoordinator(t, m, clock, "a", period, "s0")
	a.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, a, "s0")
	return m, a, clockedCoordinator(t, m, clock, "b", period), g, rec
}

// TestLeaseRenewedByTheHeartbeatAlone: a held lease whose checkpoint stays
// is never written: the instance's heartbeat renews it, and another
// instance does not count it expired while that heartbeat moves. Once the
// holder can write nothing, it stops handing out records a lease period
// after the last one that succeeded, and the other instance takes the
// lease only after that.
func TestLeaseRenewedByTheHeartbeatAlone(t *testing.T) {
	t.Parallel()
	const period = 600 * time.Millisecond
	clock := newStepClock()
	m, a, b, g, rec := holderAndWatcher(t, clock, period)
	taken := itemOf(t, m, "s0")

	step := func() {
		clock.advance(period / 6)
		_ = a.Commit(t.Context())
		b.Cycle(t.Context(), everyShard)
	}
	for end := clock.Now().Add(3 * period); clock.Now().Before(end); {
		step()
		if it := itemOf(t, m, "s0"); it.Counter != taken.Counter || it.Owner != "a" {
			t.Fatalf("item %+v, want a's as taken (counter %d): an idle lease was written, or taken while its holder beat", it, taken.Counter)
		}
		if !g.Until().After(clock.Now()) || rec.get() != nil {
			t.Fatalf("the reader may not hand out records (until %v, stopped %v) while the heartbeat succeeds", g.Until(), rec.get())
		}
	}

	// a cannot write: neither its heartbeat nor its lease (a write of the
	// lease, once fenced, would renew it as well).
	m.Fail("Heartbeat", errors.New("injected: throttled"))
	m.Fail("Beat", errors.New("injected: throttled"))
	m.Fail("Hold", errors.New("injected: throttled"))
	for end := clock.Now().Add(3 * period); clock.Now().Before(end); {
		step()
		if it := itemOf(t, m, "s0"); it.Owner == "b" {
			if now := clock.Now(); g.Until().After(now) {
				t.Fatalf("b took the lease while a's reader may hand out records until %v", g.Until())
			}
			// The reader stops at a's next commit, which fences the lease
			// (until then Until, past already, keeps it from handing out).
			_ = a.Commit(t.Context())
			if !errors.Is(rec.get(), errLeaseExpired) {
				t.Fatalf("a's reader stopped with %v, want %v", rec.get(), errLeaseExpired)
			}
			return
		}
	}
	t.Fatal("b did not take the lease of an instance whose heartbeat failed for three lease periods")
}

// TestFleetStartingTogetherSplitsTheShardsAtOnce: 16 instances start
// together on 1,024 free shards. Each waits for the others to move, then
// takes its share, first the shards that fall to it by rendezvous hashing:
// every shard is owned and the counts are within one of each other within
// two lease periods (about one here; before, the first instance took every
// shard and the others asked for theirs four at a time: about three lease
// periods).
func TestFleetStartingTogetherSplitsTheShardsAtOnce(t *testing.T) {
	t.Parallel()
	const (
		shards, instances = 1024, 16
		period            = 3 * time.Second
		step              = period / 30
	)
	// The instances take their turns one after the other here, where a
	// fleet runs them side by side: on the step clock a turn takes no time,
	// so that a loaded machine (-race, a round of 16 turns took most of a
	// period on the wall clock) cannot age the others' beats past a lease
	// period between two of their turns, which no fleet on its own clock
	// would see.
	clock := newStepClock()
	m := lease.NewMemory()
	ids := make([]string, shards)
	for i := range ids {
		ids[i] = fmt.Sprintf("shardId-%012d", i)
	}
	infos := make([]coord.Shard, shards)
	for i, id := range ids {
		infos[i] = coord.Shard{ID: id, StartSeq: fmt.Sprint(i + 1)}
	}
	// All load at once; then each pins (the first creates the items, the
	// others find them).
	var fleet []*leaseCoordinator
	var pins []coord.FirstPin
	for i := range instances {
		lc := newLeaseCoordination(m, Options{InstanceID: fmt.Sprintf("i%02d", i), LeasePeriod: period, StealLimit: 4, Clock: clock})
		c := lc.stream(testStream(service.MockResources()), coord.NewPositions(checkpoint.Stream{}))
		first, err := c.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		fleet, pins = append(fleet, c), append(pins, first)
	}
	start := clock.Now()
	for i, c := range fleet {
		if err := c.Pin(t.Context(), infos, pins[i].Start, pins[i].Due); err != nil {
			t.Fatal(err)
		}
	}
	// Each instance commits (and so beats) every step and runs its cycle
	// when the last one said, as the input's loop does.
	due := make([]time.Time, instances)
	for clock.Now().Sub(start) <= 2*period {
		now := clock.Now()
		for i, c := range fleet {
			_ = c.Commit(t.Context())
			if !now.Before(due[i]) {
				due[i] = now.Add(c.Cycle(t.Context(), everyShard))
			}
		}
		held := map[string]int{}
		for _, it := range m.Items() {
			held[it.Owner]++
		}
		lo, hi := shards, 0
		for _, c := range fleet {
			lo, hi = min(lo, held[c.me]), max(hi, held[c.me])
		}
		if held[""] == 0 && hi-lo <= 1 {
			t.Logf("balanced %v after the start: %d to %d each", now.Sub(start), lo, hi)
			return
		}
		clock.advance(step)
	}
	held := map[string]int{}
	for _, it := range m.Items() {
		held[it.Owner]++
	}
	t.Fatalf("not balanced two lease periods after the start: %v", held)
}

// TestLeasePausedHolderIsNotRevivedByItsHeartbeat: a holder paused for
// longer than a lease period (SIGSTOP) wakes up and its heartbeat
// succeeds. The leases that lapsed meanwhile are fenced, not renewed by
// that heartbeat: its reader hands out nothing more, and the lease another
// instance took meanwhile is lost at its first write. (A heartbeat that
// renewed every lease it found in the book let the woken reader hand out
// records of a shard another instance read by then.)
func TestLeasePausedHolderIsNotRevivedByItsHeartbeat(t *testing.T) {
	t.Parallel()
	const period = 300 * time.Millisecond
	clock := newStepClock()
	m, a, b, g, rec := holderAndWatcher(t, clock, period)
	skipStartWait(b)
	// a is paused: it writes nothing, while b watches.
	for end := clock.Now().Add(3 * period); clock.Now().Before(end) && itemOf(t, m, "s0").Owner != "b"; {
		clock.advance(b.Cycle(t.Context(), everyShard))
	}
	if it := itemOf(t, m, "s0"); it.Owner != "b" {
		t.Fatalf("b did not take the lease of a paused holder: %+v", it)
	}
	// a wakes: its first commit beats, and must not revive the lease.
	_ = a.Commit(t.Context())
	if st, held := a.book.stateOf("s0"); held && st == leaseHeld {
		t.Fatal("the heartbeat of a woken holder revived a lease that had lapsed")
	}
	if g.Until().After(clock.Now()) {
		t.Fatalf("the woken reader may hand out records until %v", g.Until())
	}
	if rec.get() == nil {
		t.Fatal("the woken reader was not stopped")
	}
	if _, ok := a.Acquire("s0", func(error) {}); ok {
		t.Fatal("a lapsed lease was granted after the heartbeat")
	}
	_ = a.Commit(t.Context()) // the fenced lease's write finds it taken
	if _, held := a.book.stateOf("s0"); held {
		t.Fatal("a lease taken by another instance is still in the woken holder's book")
	}
}

// TestLeaseHeartbeatAnsweredAfterTheLapseRenewsNothing: a holder's
// heartbeat is sent shortly before its lease lapses and applied (answered)
// only after the lapse. Meanwhile another instance, whose last scan did not
// show the heartbeat yet, counted the lease expired and took it: its take
// is conditional on the shard item only, which the heartbeat does not
// touch. The heartbeat's answer renews nothing that had lapsed by the time
// it came: the holder's lease is fenced, its reader hands out nothing, and
// no new reader is granted. (Before, the answer renewed the lease from the
// moment the heartbeat was sent, since only what had lapsed by then was
// fenced: two readers of one shard, each handing out the records after the
// checkpoint.)
func TestLeaseHeartbeatAnsweredAfterTheLapseRenewsNothing(t *testing.T) {
	t.Parallel()
	const period = 1200 * time.Millisecond
	clock := newStepClock()
	m := lease.NewMemory()
	slow := &slowHeartbeats{Store: m}
	a := clockedCoordinator(t, slow, clock, "a", period, "s0")
	took := clock.Now()
	a.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, a, "s0")
	b := clockedCoordinator(t, m, clock, "b", period)
	skipStartWait(b)
	b.Cycle(t.Context(), everyShard) // sees a's item and beat now

	// Shortly before the lapse, a's commit sends its heartbeat, which stays
	// in flight (a third of a lease period is its deadline).
	clock.advance(took.Add(period - period/8).Sub(clock.Now()))
	entered, release := slow.holdNext()
	done := make(chan error, 1)
	go func() { done <- a.Commit(t.Context()) }()
	<-entered

	// b's scans show a's worker as it was: b counts the lease expired a
	// lease period after it saw it, and takes it.
	for end := clock.Now().Add(period / 4); clock.Now().Before(end) && itemOf(t, m, "s0").Owner != "b"; {
		clock.advance(10 * time.Millisecond)
		b.Cycle(t.Context(), everyShard)
	}
	if it := itemOf(t, m, "s0"); it.Owner != "b" {
		t.Fatalf("b did not take the lease while a's heartbeat was in flight: %+v", it)
	}
	close(release) // the heartbeat lands, after b's take
	if err := <-done; err != nil {
		t.Fatalf("a's commit: %v", err)
	}

	now := clock.Now()
	if st, held := a.book.stateOf("s0"); held && st == leaseHeld {
		t.Errorf("a's lease of s0 is %v after b took it (a heartbeat answered after the lapse revived it)", st)
	}
	if g.Until().After(now) {
		t.Errorf("b took s0, and a's reader may hand out records of it until %v (%v from now)", g.Until().Format(time.RFC3339Nano), g.Until().Sub(now).Round(time.Millisecond))
	}
	// The real reader stopped itself at the lapse (errLapsed): once it is
	// settled, the shard is scheduled again.
	g.Stopped(t.Context(), settledNow)
	if _, ok := a.Acquire("s0", func(error) {}); ok {
		t.Errorf("a granted s0 to a new reader while b holds its lease (reader stopped with %v)", rec.get())
	}
}

// TestLeaseIsNotHandedToAnAskerKnownDead: b asks a for s0. a reads on
// until it sees b alive after the ask (one that died right after asking
// stops no reader); then it stops its reader, whose last batch is still in
// the output, and b crashes. a waits for the batch a lease period at most,
// and by then b is dead to a (its worker item did not move for a lease
// period; a's cycle even removes it). The handover is checked against what
// a knows of b when it is due, and b is known dead for good once a removed
// its item: a keeps s0, removes the ask, and reads on. (Before, the ask was
// checked only when first seen, the handover was written to b, and s0
// stayed unread until that lease expired, over two lease periods after the
// ask.)
func TestLeaseIsNotHandedToAnAskerKnownDead(t *testing.T) {
	t.Parallel()
	// On the step clock: on the wall clock, a loaded CI machine (every
	// package's tests under -race) stretched the steps below past their
	// fractions of the lease period, and the handover went to b once.
	const period = time.Second
	clock := newStepClock()
	m := lease.NewMemory()
	a := clockedCoordinator(t, m, clock, "a", period, "s0")
	a.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, a, "s0")
	g.Acked(pos(3))
	// b lives: a sees its worker item move.
	beat := func() {
		if err := m.Heartbeat(t.Context(), testARN, "b", lease.Presence{Nonce: "nb"}, false); err != nil {
			t.Fatal(err)
		}
	}
	beat()
	a.Cycle(t.Context(), everyShard)
	beat()
	a.Cycle(t.Context(), everyShard)
	if !a.view.live(clock.Now())["b"] {
		t.Fatal("b is not live to a")
	}
	if err := m.Ask(t.Context(), itemOf(t, m, "s0"), "b", "nb"); err != nil { // b asks
		t.Fatal(err)
	}
	asked := clock.Now()
	a.Cycle(t.Context(), everyShard) // the ask is seen; b not seen alive since: a reads on
	if st, _ := a.book.stateOf("s0"); st != leaseHeld || rec.get() != nil {
		t.Fatalf("lease %v, reader stopped with %v: want held and read on until b is seen alive after its ask", st, rec.get())
	}
	clock.advance(period / 6)
	beat()                           // b's last heartbeat: it crashes after it
	a.Cycle(t.Context(), everyShard) // b alive since its ask: the reader stops
	if st, _ := a.book.stateOf("s0"); st != leaseHandingOver || rec.get() == nil {
		t.Fatalf("lease %v, reader stopped with %v: want handing over", st, rec.get())
	}
	// The reader's last batch is still in the output: it settles once
	// release is closed.
	release, waiting, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		g.Stopped(t.Context(), func(ctx context.Context) error {
			close(waiting)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	select {
	case <-waiting:
	case <-stopped:
		t.Fatal("the stopped reader did not wait for its last batch")
	}
	bGone := func() bool {
		for _, w := range m.Workers() {
			if w.ID == "b" {
				return false
			}
		}
		return true
	}
	// a commits and cycles until b's presence is removed as dead, and
	// twice more; the ask is decided meanwhile.
	var goneAt time.Time
	for after := 0; after < 2; {
		clock.advance(period / 6)
		_ = a.Commit(t.Context())
		if it := itemOf(t, m, "s0"); it.Owner == "b" {
			t.Fatalf("a handed s0 to b, silent since %v before: %+v", clock.Now().Sub(asked)-period/6, it)
		}
		a.Cycle(t.Context(), everyShard)
		if !goneAt.IsZero() {
			after++
		} else if bGone() {
			goneAt = clock.Now()
		}
		if clock.Now().Sub(asked) > 5*period {
			t.Fatalf("b's presence not removed within 5 lease periods of its last heartbeat: %+v", m.Workers())
		}
	}
	it := itemOf(t, m, "s0")
	t.Logf("b's worker item removed as dead by a %v after the ask; item %+v", goneAt.Sub(asked).Round(time.Millisecond), it)
	if it.Owner != "a" || it.HandoffTo != "" {
		t.Fatalf("item %+v, want a's with the ask of b, dead, removed", it)
	}
	if st, held := a.book.stateOf("s0"); !held || st != leaseHeld {
		t.Fatalf("a's lease of s0 is %v (in the book: %v), want held", st, held)
	}
	// The reader settles: s0 is read on, after its last acknowledgement.
	g.Acked(pos(4))
	close(release)
	<-stopped
	g2, _ := mustGrant(t, a, "s0")
	if p := g2.Start().Position; p == nil || *p != pos(4) {
		t.Fatalf("the next reader starts after %v, want 4", p)
	}
}

// TestLeaseLostRenewalAnswerThenHandoverAtTheLastAck: a's
// checkpoint write lands but its answer is lost, so a's book keeps the old
// counter; b asks; a's reader settles and the handover is built at the old
// counter. A write of a's own process (its nonce) applies one counter
// behind, so the handover lands at once rather than failing against a's own
// write (under a slow table every later answer may come too late as well),
// after the last acknowledgement: a neither drops the lease early nor takes
// it back from the older checkpoint.
func TestLeaseLostRenewalAnswerThenHandoverAtTheLastAck(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	st := &lostAnswers{Store: m}
	a := storeCoordinator(t, st, "a", time.Minute, "s0")
	a.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, a, "s0")
	g.Acked(pos(3))
	st.loseNext.Store(true)
	if err := a.Commit(t.Context()); err == nil {
		t.Fatal("the commit whose answer was lost did not fail")
	}
	askAsLiveInstance(t, m, "s0", "b", a)
	a.Cycle(t.Context(), everyShard) // the ask is seen: the reader stops
	if it := itemOf(t, m, "s0"); it.Owner != "a" {
		t.Fatalf("handed over before the reader settled: %+v", it)
	}
	g.Acked(pos(4))
	g.Stopped(t.Context(), settledNow) // the handover, one counter behind
	if it := itemOf(t, m, "s0"); it.Owner != "b" || it.Checkpoint.Position == nil || *it.Checkpoint.Position != pos(4) {
		t.Fatalf("item once the reader settled %+v, want b's at 4", it)
	}
	if err := a.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.Cycle(t.Context(), everyShard)
	it := itemOf(t, m, "s0")
	if it.Owner != "b" || it.Checkpoint.Position == nil || *it.Checkpoint.Position != pos(4) {
		t.Fatalf("item after the handover %+v, want b's at 4", it)
	}
	if _, held := a.book.stateOf("s0"); held {
		t.Fatal("a took s0 back")
	}
}
