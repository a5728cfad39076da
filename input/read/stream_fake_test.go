package read

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// TestParentPastRetentionDoesNotBlockChildren: a closed parent shard
// that is still being read when it passes the retention period (the input was
// down for most of a day, or is far behind) disappears from ListShards and
// answers ResourceNotFoundException. Its records are gone; its children's
// records are not, yet, and expire in turn if they are not read.
//
// Before the fix, parentsEnded treated a parent no longer listed as gone, but
// discover keeps every shard that has a running reader in s.loop.shards ("being
// read: not gone yet"), and the parent's reader never stops: shardReader.publish
// retries the fatal ResourceNotFound forever (with a backoff of up to 2 min).
// So the children are never read: a permanent, silent-but-for-logs stall that
// turns into further loss when the children's records expire.
func TestParentPastRetentionDoesNotBlockChildren(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	const parent = "shardId-000000000000"
	if _, _, err := srv.Put("orders", "k", []byte("old")); err != nil {
		t.Fatal(err)
	}
	children, err := srv.SplitShard("orders", parent, "")
	if err != nil {
		t.Fatal(err)
	}
	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	// The listing once the parent has passed the retention period.
	type hk struct{ StartingHashKey, EndingHashKey string }
	type sn struct{ StartingSequenceNumber string }
	type sh struct {
		ShardId             string
		ParentShardId       string `json:",omitempty"`
		HashKeyRange        hk
		SequenceNumberRange sn
	}
	var listing struct{ Shards []sh }
	for _, s := range shards {
		if aws.ToString(s.ShardId) == parent {
			continue
		}
		listing.Shards = append(listing.Shards, sh{
			ShardId: aws.ToString(s.ShardId), ParentShardId: aws.ToString(s.ParentShardId),
			HashKeyRange:        hk{aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey)},
			SequenceNumberRange: sn{aws.ToString(s.SequenceNumberRange.StartingSequenceNumber)},
		})
	}
	expiredListing, _ := json.Marshal(listing)

	var expired atomic.Bool
	expired.Store(true) // already past retention when the input (re)starts reading it
	var mu sync.Mutex
	childReads := 0
	srv.Control("ListShards", func(*kinesisfake.Request) (bool, int, []byte) {
		if expired.Load() {
			return true, 200, expiredListing
		}
		return false, 0, nil
	})
	srv.Control("GetShardIterator", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ ShardId string }
		json.Unmarshal(r.Body, &in)
		if in.ShardId == parent {
			status, body := kinesisfake.ErrorBody("ResourceNotFoundException", "Shard "+parent+" does not exist")
			return true, status, body
		}
		mu.Lock()
		childReads++
		mu.Unlock()
		return false, 0, nil
	})
	// The parent is known and unfinished: a checkpoint from before the outage.
	expired.Store(false)
	store := inputtest.OpenFileStore(t)
	h := startStreamHarness(t, srv, store, func(client *kinesis.Client) Publisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	}, discoverEvery(time.Second))
	inputtest.WaitUntil(t, 10*time.Second, func() bool {
		_, ok := h.s.pos.Of(parent)
		return ok
	})
	expired.Store(true) // the parent passes the retention period
	read := inputtest.Eventually(time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return childReads > 0
	})
	if !read {
		t.Fatalf("the parent %s is gone (not listed, ResourceNotFound) but its children %v were never read in a minute: its reader keeps it 'running', so it is never pruned and parentsEnded waits for it forever", parent, children)
	}
}

// TestMergeWaitsForAParentLearntLater: shard 0 splits into C0 and C1,
// then C1 merges with shard 1 into M (UpdateShardCount does such sequences).
// Shard 0's reader is behind, so shard 1 reaches its end first and reports
// M as its child, with parents [C1, shard 1]. C1 is not known yet (it is only
// learnt from shard 0's end, or the next discovery). M must not be read
// before C1 (and so shard 0) has been read to its end: records of the
// partition keys that moved from shard 0 to C1 to M would come out of order.
//
// Before a fix, parentsEnded takes a parent it does not know for "gone past
// retention" and M is read at once, before C1 and before shard 0 ends.
func TestMergeWaitsForAParentLearntLater(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"

	var mu sync.Mutex
	started := map[string]time.Time{}
	ended := map[string]time.Time{}
	var c0, c1, m string
	release := make(chan struct{})
	resharded := make(chan struct{})

	pub := scriptedPub{read: func(ctx context.Context, id string, start shard.Start, deliver shard.Deliver) error {
		mu.Lock()
		started[id] = time.Now()
		mu.Unlock()
		end := func(b shard.Batch) error {
			b.End = true
			if err := deliver(ctx, b); err != nil {
				return err
			}
			mu.Lock()
			ended[id] = time.Now()
			mu.Unlock()
			return nil
		}
		switch id {
		case s0: // behind: its end comes late
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return end(shard.Batch{Records: []types.Record{reviewRecord("100", "s0-last")}, ChildShards: []types.ChildShard{
				{ShardId: aws.String(c0), ParentShards: []string{s0}},
				{ShardId: aws.String(c1), ParentShards: []string{s0}},
			}})
		case s1:
			select {
			case <-resharded:
			case <-ctx.Done():
				return ctx.Err()
			}
			return end(shard.Batch{Records: []types.Record{reviewRecord("200", "s1-last")}, ChildShards: []types.ChildShard{
				{ShardId: aws.String(m), ParentShards: []string{c1, s1}},
			}})
		default:
			return end(shard.Batch{Records: []types.Record{reviewRecord("300", id)}})
		}
	}}

	startStreamHarness(t, srv, inputtest.OpenFileStore(t), publisher(pub), discoverEvery(time.Hour))
	// Wait until both shards are being read (discovery and pinning done).
	inputtest.WaitUntil(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 2 })

	children, err := srv.SplitShard("orders", s0, "")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := srv.MergeShards("orders", children[1], s1)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	c0, c1, m = children[0], children[1], merged
	mu.Unlock()
	close(resharded)

	// Shard 1 ends; give the stream reader time to act on its children.
	inputtest.WaitUntil(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); _, ok := ended[s1]; return ok })
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	mStart, mStarted := started[m]
	_, c1Ended := ended[c1]
	_, s0Ended := ended[s0]
	mu.Unlock()
	close(release)
	if mStarted && !c1Ended {
		t.Fatalf("merged shard %s was read at %v while its parent %s was never read (and %s, its parent, had not ended: %v): parentsEnded took the unknown parent for gone",
			m, mStart.Format(time.RFC3339Nano), c1, s0, s0Ended)
	}
}

// TestChildWaitsForDurableParentEnd: a parent reaches its end but the
// commit of that end fails (disk full, EIO). The child must not be read while
// the parent's end is not checkpointed (the design: "read only after every parent
// has been read to its end and that end checkpointed").
//
// Before a fix, setEnded marks the parent Ended in memory before the commit
// and keeps it so when the commit fails; the next schedule (here a discovery
// tick) starts the child.
func TestChildWaitsForDurableParentEnd(t *testing.T) {
	t.Parallel()
	var listings atomic.Int64
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1), kinesisfake.OnRequest(func(op string, _ http.Header) {
		if op == "ListShards" {
			listings.Add(1)
		}
	}))
	const s0 = "shardId-000000000000"
	children, err := srv.SplitShard("orders", s0, "")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	started := map[string]bool{}
	pub := scriptedPub{read: func(ctx context.Context, id string, start shard.Start, deliver shard.Deliver) error {
		mu.Lock()
		started[id] = true
		mu.Unlock()
		if id != s0 {
			<-ctx.Done()
			return ctx.Err()
		}
		return deliver(ctx, shard.Batch{Records: []types.Record{reviewRecord("100", "s0-last")}, End: true})
	}}
	store := &endFailingStore{Store: inputtest.OpenFileStore(t)}
	startStreamHarness(t, srv, store, publisher(pub), discoverEvery(100*time.Millisecond))

	inputtest.WaitUntil(t, 10*time.Second, func() bool { return store.failed() > 0 })
	// Two discoveries (each a schedule) after the failed commit.
	seen := listings.Load()
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return listings.Load() >= seen+2 })
	mu.Lock()
	defer mu.Unlock()
	for _, c := range children {
		if started[c] {
			t.Fatalf("child %s is being read although the end of its parent %s was never checkpointed (%d failed commits of it)", c, s0, store.failed())
		}
	}
}

// TestRecreatedStreamWithRegistrationNone: with efo.registration none
// the input never describes the stream, so Stream.created stays zero and
// load's "deleted and created again" check is skipped. Before the fix (a
// check of each shard's starting sequence number at discovery), a stream
// deleted and created again under the same name (and a new consumer ARN in the
// config) inherited the old stream's checkpoints: its shardId-000000000000 was
// taken for the old, ended one and never read. Silent loss.
//
// The harness builds the Stream as the input's prepareStream does for registration
// none (no describe, zero creation time); it reads by polling for brevity.
func TestRecreatedStreamWithRegistrationNone(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	mkPolling := func(client *kinesis.Client) Publisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	}
	for i := 0; i < 3; i++ {
		if _, _, err := srv.Put("orders", "k", []byte(fmt.Sprintf("old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.SplitShard("orders", "shardId-000000000000", ""); err != nil {
		t.Fatal(err)
	}

	// First life of the stream: shard 0 is read to its end.
	store1, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := startStreamHarness(t, srv, store1, mkPolling)
	inputtest.WaitUntil(t, 20*time.Second, func() bool {
		cp, _ := h.s.pos.Of("shardId-000000000000")
		return cp.Ended
	})
	h.stop(t)
	store1.Close()

	// The stream is deleted and created again, with new records.
	if err := srv.DeleteStream("orders"); err != nil {
		t.Fatal(err)
	}
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return srv.CreateStream("orders", 1) == nil })
	for i := 0; i < 3; i++ {
		if _, _, err := srv.Put("orders", "k", []byte(fmt.Sprintf("new-%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	store2, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	h2 := startStreamHarness(t, srv, store2, mkPolling)
	if !inputtest.Eventually(time.Minute, func() bool { return slices.Contains(h2.data(), "new-0") }) {
		got := h2.data()
		cp, _ := h2.s.pos.Of("shardId-000000000000")
		t.Fatalf("the recreated stream's records were never read (got %q); its shardId-000000000000 carries the old stream's checkpoint %+v", got, cp)
	}
}

// TestStreamCreatedAgainIsPinnedAsNewWhenItsResetFails: the reset of a
// stream found created again forgets its checkpoints, then writes the new
// stream's item to the store, and that write can fail (DynamoDB throttled).
// The next discovery finds no old checkpoint left to tell it the stream is
// new, so the reset must have made the stream new already: its next pin is
// the new stream's first (start_from, and the stream's item written again).
// Before, it pinned the shards from trim_horizon as shards created later,
// and the lease table's item of the stream stayed the old one's.
func TestStreamCreatedAgainIsPinnedAsNewWhenItsResetFails(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	store, err := checkpoint.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := &resetFailing{failResets: 1}
	h := startStreamHarness(t, srv, store, func(client *kinesis.Client) Publisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	}, discoverEvery(50*time.Millisecond), func(e *Env) {
		e.Start, e.Coord = Start{Name: "at_timestamp", At: at}, resetFailingCoordination{e.Coord, rc}
	})
	inputtest.WaitUntil(t, 10*time.Second, func() bool { _, ok := h.s.pos.Of("shardId-000000000000"); return ok })
	if err := srv.DeleteStream("orders"); err != nil {
		t.Fatal(err)
	}
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return srv.CreateStream("orders", 1) == nil })
	inputtest.WaitUntil(t, 20*time.Second, func() bool { return rc.resets.Load() >= 2 || len(rc.pinned()) > 0 })
	pins := rc.pinned()
	want := checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: at})
	if len(pins) != 1 || !pins[0].first || pins[0].start.Kind != want.Kind || pins[0].start.Timestamp == nil || !pins[0].start.Timestamp.Equal(at) {
		t.Errorf("after a reset whose write failed, the new stream was pinned as %+v, want one first pin from start_from (%+v)", pins, want)
	}
}

// resetFailingCoordination makes its stream's coordinator a resetFailing.
type resetFailingCoordination struct {
	coord.Coordination
	rc *resetFailing
}

func (c resetFailingCoordination) Stream(st coord.Stream, pos *coord.Positions) coord.Coordinator {
	c.rc.Coordinator = c.Coordination.Stream(st, pos)
	return c.rc
}

// resetFailing is a coordinator whose first failResets resets fail after
// forgetting the stream (as a lease table's write of the stream item does),
// and which records the first pin that succeeds after a reset.
type resetFailing struct {
	coord.Coordinator
	failResets int32
	resets     atomic.Int32
	mu         sync.Mutex
	reset      bool // a pin since the last reset is still to come
	pins       []pinCall
}

type pinCall struct {
	first bool
	start checkpoint.Start
}

func (r *resetFailing) Reset(ctx context.Context, created time.Time) error {
	if err := r.Coordinator.Reset(ctx, created); err != nil {
		return err
	}
	r.mu.Lock()
	r.reset = true
	r.mu.Unlock()
	if r.resets.Add(1) <= r.failResets {
		return errors.New("injected: the stream item's write failed")
	}
	return nil
}

func (r *resetFailing) Pin(ctx context.Context, shards []coord.Shard, start checkpoint.Start, first bool) error {
	if err := r.Coordinator.Pin(ctx, shards, start, first); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reset {
		r.reset = false
		r.pins = append(r.pins, pinCall{first, start})
	}
	return nil
}

func (r *resetFailing) pinned() []pinCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pins)
}

// TestChildrenOfTheOldStreamAreIgnored: a reader of the stream before a
// reset (deleted and created again) may report the end of its shard just
// after the reset. Before the fix its children were adopted into the new
// stream's state: pinned, and read as shards of the new stream (or, with an
// id the new stream also has, started before their time).
func TestChildrenOfTheOldStreamAreIgnored(t *testing.T) {
	t.Parallel()
	store, err := checkpoint.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := NewStream(testEnv(store, nil), StreamConfig{Name: "orders", ARN: "arn:aws:kinesis:us-east-1:123456789012:stream/orders"})
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.loop.running["shardId-000000000000"] = func(error) {}
	if err := s.reset(t.Context()); err != nil { // no describe: as with registration none
		t.Fatal(err)
	}
	child := shardInfo{id: "shardId-000000000001", parents: []string{"shardId-000000000000"}}
	s.readerEnded(t.Context(), shardEvent{shardID: "shardId-000000000000", epoch: 0, ended: true, children: []shardInfo{child}})
	if _, ok := s.loop.shards[child.id]; ok {
		t.Fatal("a child reported by a reader of the old stream was adopted by the new one")
	}
	if _, ok := s.pos.Of(child.id); ok {
		t.Fatal("a child reported by a reader of the old stream was pinned in the new one's state")
	}
	if len(s.loop.running) != 0 {
		t.Fatal("the old reader is still counted as running")
	}
	// The same event of the current state is adopted.
	s.loop.running["shardId-000000000000"] = func(error) {}
	s.readerEnded(t.Context(), shardEvent{shardID: "shardId-000000000000", epoch: s.pos.Epoch(), ended: true, children: []shardInfo{child}})
	if _, ok := s.pos.Of(child.id); !ok {
		t.Fatal("a child reported by a current reader was not pinned")
	}
}

// TestParentCycle finds shards whose parents lead back to themselves.
func TestParentCycle(t *testing.T) {
	sh := func(id string, parents ...string) shardInfo { return shardInfo{id: id, parents: parents} }
	for _, tc := range []struct {
		name   string
		shards []shardInfo
		cycle  string
	}{
		{"a split and a merge", []shardInfo{sh("0"), sh("1", "0"), sh("2", "0"), sh("3", "1", "2")}, ""},
		{"parents gone", []shardInfo{sh("5", "1"), sh("6", "5", "4")}, ""},
		{"two", []shardInfo{sh("0", "1"), sh("1", "0")}, "0 1 0"},
		{"itself", []shardInfo{sh("7", "7")}, "7 7"},
		{"behind a good one", []shardInfo{sh("0"), sh("1", "0", "3"), sh("2", "1"), sh("3", "2")}, "1 3 2 1"},
	} {
		shards := map[string]shardInfo{}
		for _, s := range tc.shards {
			shards[s.id] = s
		}
		if got := strings.Join(parentCycle(shards), " "); got != tc.cycle {
			t.Errorf("%s: cycle %q, want %q", tc.name, got, tc.cycle)
		}
	}
}

// TestNeverListed tells a shard id that cannot be of the stream (above every
// listed one, or not a shard id) from one that may have passed retention.
func TestNeverListed(t *testing.T) {
	listed := []shardInfo{{id: "shardId-000000000003"}, {id: "shardId-000000000004"}}
	for id, want := range map[string]bool{
		"shardId-000000000001": false, // may have passed the retention period
		"shardId-000000000099": true,
		"shard-7":              true,
		"shardId-":             true,
	} {
		if got := neverListed(id, listed); got != want {
			t.Errorf("neverListed(%s) = %v, want %v", id, got, want)
		}
	}
}

// endFailingStore fails every save that records a shard's end.
type endFailingStore struct {
	checkpoint.Store
	mu    sync.Mutex
	fails int
}

func (s *endFailingStore) Save(ctx context.Context, st checkpoint.Stream) error {
	for _, cp := range st.Shards {
		if cp.Ended {
			s.mu.Lock()
			s.fails++
			s.mu.Unlock()
			return errors.New("injected: no space left on device")
		}
	}
	return s.Store.Save(ctx, st)
}

func (s *endFailingStore) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fails
}
