package leasecoord

// The coordinator's start (join: one name, one process), and a stream
// deleted and created again (Reset), against an in-memory table.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// TestLeaseNewProcessOfAPausedOnesNameWaitsForItsLeasesToExpire: a
// process holding s0 under a fixed instance_id is paused (GC, SIGSTOP, a
// frozen node); a second process starts with the same instance_id. It
// watches the old worker item for a lease period, sees it still, and
// takes the name over; s0 is the old process's lease, not its own (another
// nonce): it is taken only once expired by the usual rules, after the
// paused reader's grant lapsed. (Before, the newcomer watched for half a
// lease period and adopted s0 at its first cycle as if handed to it, while
// the paused process's lease was still valid: both read s0.)
func TestLeaseNewProcessOfAPausedOnesNameWaitsForItsLeasesToExpire(t *testing.T) {
	t.Parallel()
	const period = 600 * time.Millisecond
	clock := newStepClock()
	m := lease.NewMemory()
	old := clockedCoordinator(t, m, clock, "same", period, "s0")
	old.Cycle(t.Context(), everyShard)
	g, rec := mustGrant(t, old, "s0")
	// old is paused from here on: it writes nothing.

	lc := newLeaseCoordination(m, Options{InstanceID: "same", LeasePeriod: period, StealLimit: 4, Clock: clock})
	newer := lc.stream(testStream(service.MockResources()), coord.NewPositions(checkpoint.Stream{}))
	first, err := newer.Load(t.Context()) // watches the old item for a lease period
	if err != nil {
		t.Fatalf("the second process was refused: %v", err)
	}
	if err := newer.Pin(t.Context(), []coord.Shard{{ID: "s0", StartSeq: "1"}}, first.Start, first.Due); err != nil {
		t.Fatal(err)
	}
	for end := clock.Now().Add(3 * period); ; {
		clock.advance(newer.Cycle(t.Context(), everyShard))
		g2, ok := newer.Acquire("s0", func(error) {})
		now := clock.Now()
		if ok && g.Until().After(now) {
			t.Fatalf("the new process reads s0 from %v while the paused one's reader may hand out records of it until %v (%v from now; stopped: %v)",
				g2.Start().Position, g.Until().Format(time.RFC3339Nano), g.Until().Sub(now).Round(time.Millisecond), rec.get())
		}
		if ok {
			return
		}
		if now.After(end) {
			t.Fatalf("the new process did not take s0 within 3 lease periods of its start: %+v", itemOf(t, m, "s0"))
		}
	}
}

// TestLeaseLiveProcessOfTheSameNameIsRefused: a process runs under a fixed
// instance_id and commits every sixth of a lease period, as the input does:
// its heartbeat moves its worker item every third to half of a lease
// period. A second process starts with the same instance_id just after one
// of those heartbeats; the first process's next heartbeats take 25 ms
// longer than the one before. The second process watches the item for a
// lease period, sees it move, and refuses to start. (Before, it watched
// for half a lease period: a heartbeat a few milliseconds late landed after
// the watch, and the second process took the name over and adopted s0 at
// once, while the first one, alive, read it.)
func TestLeaseLiveProcessOfTheSameNameIsRefused(t *testing.T) {
	t.Parallel()
	const period = 600 * time.Millisecond
	trials := 8
	for trial := range trials {
		m := lease.NewMemory()
		st := &jitteryBeats{Store: m}
		old := storeCoordinator(t, st, "same", period, "s0")
		old.Cycle(t.Context(), everyShard)
		g, _ := mustGrant(t, old, "s0")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { // the first process's commit loop
			defer close(done)
			tk := time.NewTicker(period / 6)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
					_ = old.Commit(ctx)
				}
			}
		}()
		// Just after one of its heartbeats, the next ones are 25 ms slower.
		b0 := beatOf(t, m, "same")
		for b := b0; b.Counter == b0.Counter; b = beatOf(t, m, "same") {
			time.Sleep(time.Millisecond)
		}
		st.delay.Store(int64(25 * time.Millisecond))
		lc := newLeaseCoordination(m, Options{InstanceID: "same", LeasePeriod: period, StealLimit: 4})
		newer := lc.stream(testStream(service.MockResources()), coord.NewPositions(checkpoint.Stream{}))
		first, err := newer.Load(t.Context())
		if err == nil {
			_ = newer.Pin(t.Context(), []coord.Shard{{ID: "s0", StartSeq: "1"}}, first.Start, first.Due)
			newer.Cycle(t.Context(), everyShard)
			_, adopted := newer.Acquire("s0", func(error) {})
			until := time.Until(g.Until()).Round(time.Millisecond)
			cancel()
			<-done
			t.Fatalf("trial %d: a second process with the instance_id of a live one was not refused; it reads s0: %v, while the live one's reader may hand out records of s0 until %v from now",
				trial, adopted, until)
		}
		cancel()
		<-done
	}
	t.Logf("refused in all %d trials", trials)
}

// TestLeaseEndOfTheOldStreamIsNotStoredInTheNewOne: a reader of the old
// stream stores its shard's end (Ended: one write, not cancelled) just as
// discovery finds the stream deleted and created again (Reset). The write
// lands after the reset; its lease was taken in the old epoch, so the end
// stays out of the new stream's positions, and the pin of the new stream
// pins s0 afresh. (Before, the write recorded the end with pos.Set, which
// took no epoch: the new stream's s0 had the old stream's end, its pin
// skipped s0, and s0 was not read until a later discovery reset again.)
func TestLeaseEndOfTheOldStreamIsNotStoredInTheNewOne(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	st := &heldHolds{Store: m}
	c := storeCoordinator(t, st, "a", time.Minute, "s0")
	c.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, c, "s0")
	entered, release := st.holdNext()
	ended := make(chan error, 1)
	last := pos(9)
	go func() { ended <- g.Ended(t.Context(), &last) }()
	<-entered
	if err := c.Reset(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	close(release)
	// The write lands, in the old stream's item; the lease it was made
	// under was dropped meanwhile, so the end counts for nothing.
	if err := <-ended; !errors.Is(err, errEndNotStored) {
		t.Fatalf("the end of a shard of the stream before the reset: %v, want %v", err, errEndNotStored)
	}
	if err := c.Pin(t.Context(), []coord.Shard{{ID: "s0", StartSeq: "100"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, true); err != nil {
		t.Fatal(err)
	}
	cp, _ := c.pos.Of("s0")
	it := itemOf(t, m, "s0")
	if cp.Ended || cp.ShardStart != "100" {
		t.Errorf("after the reset and the pin of the new stream, s0's position is the old stream's end (ended %v, start %q, end saved %v); the item is %+v",
			cp.Ended, cp.ShardStart, c.pos.EndSaved("s0"), it)
	}
}

// TestLeaseNoneIsTakenWhileTheStreamIsNotPinned: after a reset (the
// stream created again) an instance whose pin fails starts no reader, so
// it takes no lease either, though the shards' items are in the table: a
// lease it took would stay unread while another instance could read it.
// Once its pin succeeds, it takes. (Simulation seed 28566: an instance cut
// off just after its reset, its pins applied and their answers lost, took
// a free lease and held it unread for three lease periods.)
func TestLeaseNoneIsTakenWhileTheStreamIsNotPinned(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	st := &lostStreamWrites{Store: m}
	a := storeCoordinator(t, st, "a", time.Minute)
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	st.lose.Store(true)
	if err := a.Reset(t.Context(), created); err == nil {
		t.Fatal("the reset's write of the stream item, its answer lost, reported no error")
	}
	shards := []coord.Shard{{ID: "s0", StartSeq: "100"}}
	start := checkpoint.Start{Kind: "TRIM_HORIZON"}
	if err := a.Pin(t.Context(), shards, start, true); err == nil {
		t.Fatal("the pin whose stream item write lost its answer reported no error")
	}
	if it := itemOf(t, m, "s0"); it.Owner != "" {
		t.Fatalf("s0's item after a's failed pin: %+v, want it free", it)
	}
	a.Cycle(t.Context(), everyShard)
	if it := itemOf(t, m, "s0"); it.Owner != "" {
		t.Errorf("a, whose pin failed, took s0 (its item: %+v): no reader of a reads it", it)
	}
	st.lose.Store(false)
	if err := a.Pin(t.Context(), shards, start, true); err != nil {
		t.Fatal(err)
	}
	a.Cycle(t.Context(), everyShard)
	mustGrant(t, a, "s0")
}

// TestLeasePinOfAListingBehindKeepsTheNewStreamsItem: b pins shard s0 of
// the stream created at t2; a, whose listing is behind (it still sees the
// stream created at t1, deleted since), pins s0 as it started then. a does
// not put the old shard's item back over the new one's (which would free
// it under b and drop its checkpoint: the simulation's seeds 14261 and
// 62103 had two valid grants and records handed out twice); it leaves s0
// unread until its listing catches up.
func TestLeasePinOfAListingBehindKeepsTheNewStreamsItem(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	t1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	start := checkpoint.Start{Kind: "TRIM_HORIZON"}
	logs := &inputtest.Logs{}
	start2 := func(me string, created time.Time, shardStart string) *leaseCoordinator {
		res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil)))))
		st := testStream(res)
		st.Created = created
		c := newLeaseCoordination(m, Options{InstanceID: me, LeasePeriod: time.Minute, StealLimit: 4}).stream(st, coord.NewPositions(checkpoint.Stream{}))
		if _, err := c.Load(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := c.Pin(t.Context(), []coord.Shard{{ID: "s0", StartSeq: shardStart}}, start, false); err != nil {
			t.Fatalf("%s's pin: %v", me, err)
		}
		return c
	}
	b := start2("b", t2, "200")
	b.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, b, "s0")
	g.Acked(pos(205))
	if err := b.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := start2("a", t1, "100")
	a.Cycle(t.Context(), everyShard)
	if _, ok := a.Acquire("s0", func(error) {}); ok {
		t.Errorf("a, whose listing is behind, reads s0")
	}
	it := itemOf(t, m, "s0")
	if it.Checkpoint.ShardStart != "200" || it.Owner != "b" || !it.Created.Equal(t2) || it.Checkpoint.Position == nil || it.Checkpoint.Position.Sequence != "205" {
		t.Fatalf("s0's item after a pinned it from a listing behind: %+v; want the new stream's (start 200, created %v), held by b at 205", it, t2)
	}
	if err := b.Commit(t.Context()); err != nil {
		t.Errorf("b's lease after a's pin: %v", err)
	}
	if !strings.Contains(logs.String(), "shard s0: the lease table holds it as a shard of the stream created again after this instance listed it") {
		t.Errorf("a said nothing of the shard it leaves unread:\n%s", logs)
	}
}

// TestLeaseStreamItemThatCannotBeReadIsReplaced: a stream item whose
// streamCreated is no time (a hand edit) is replaced at start by one of the
// stream as it is, with a warning; the checkpoint of a shard that starts
// where its item says is kept. Before, the whole stream stopped with an
// ERROR every second, naming no fix.
func TestLeaseStreamItemThatCannotBeReadIsReplaced(t *testing.T) {
	t.Parallel()
	m := lease.NewMemory()
	a := storeCoordinator(t, m, "a", time.Minute, "s0")
	a.Cycle(t.Context(), everyShard)
	g, _ := mustGrant(t, a, "s0")
	g.Acked(pos(5))
	if err := a.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	m.SetItem(map[string]types.AttributeValue{
		"leaseKey": &types.AttributeValueMemberS{Value: testARN}, "kind": &types.AttributeValueMemberS{Value: "stream"},
		"streamArn": &types.AttributeValueMemberS{Value: testARN}, "startKind": &types.AttributeValueMemberS{Value: "TRIM_HORIZON"},
		"pinned": &types.AttributeValueMemberBOOL{Value: true}, "streamCreated": &types.AttributeValueMemberS{Value: "garbage"},
	})
	logs := &inputtest.Logs{}
	res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil)))))
	lc := newLeaseCoordination(m, Options{InstanceID: "b", LeasePeriod: time.Minute, StealLimit: 4})
	b := lc.stream(testStream(res), coord.NewPositions(checkpoint.Stream{}))
	if _, err := b.Load(t.Context()); err != nil {
		t.Fatalf("a stream item that cannot be read stopped the stream: %v", err)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="stream orders: the lease table memory's item of the stream cannot be read (item `+testARN+`: attribute streamCreated: \"garbage\" is not an RFC 3339 time): it is replaced`) {
		t.Errorf("no warning naming the item and its attribute:\n%s", logs)
	}
	sc, err := m.ScanConsistent(t.Context(), testARN)
	if err != nil || sc.Stream == nil || sc.Stream.Malformed != "" {
		t.Fatalf("the stream item after the start: %+v, %v", sc.Stream, err)
	}
	if err := b.Pin(t.Context(), []coord.Shard{{ID: "s0", StartSeq: "1"}}, checkpoint.Start{Kind: "TRIM_HORIZON"}, false); err != nil {
		t.Fatal(err)
	}
	b.Cycle(t.Context(), everyShard)
	if cp, _ := b.pos.Of("s0"); cp.Position == nil || cp.Position.Sequence != "5" {
		t.Errorf("s0's checkpoint after the stream item was replaced: %+v, want after 5", cp)
	}
}
