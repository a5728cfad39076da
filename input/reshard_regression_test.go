package input

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// scriptedPub is a recordPublisher made of one function field.
type scriptedPub struct {
	read func(ctx context.Context, shardID string, start shard.Start, deliver shard.Deliver) error
}

func (p scriptedPub) Read(ctx context.Context, shardID string, start shard.Start, deliver shard.Deliver) error {
	return p.read(ctx, shardID, start, deliver)
}

// streamHarness runs one streamReader of a real input against the fake (for
// ListShards only) with a scripted publisher, and acknowledges every batch
// the moment ReadBatch would hand it out.
type streamHarness struct {
	in     *kinesisInput
	s      *streamReader
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	got   []string // data of every message acknowledged
	sizes []int    // size of every batch handed out
}

func (h *streamHarness) data() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// stop ends the reader as Close does: stop, wait, commit.
func (h *streamHarness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	h.wg.Wait()
	if err := h.s.pos.commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func startStreamHarness(t *testing.T, srv *kinesisfake.Server, extra string, store checkpoint.Store, pub recordPublisher) *streamHarness {
	t.Helper()
	return startStreamHarnessWith(t, srv, extra, store, func(*kinesisInput, *kinesis.Client) recordPublisher { return pub })
}

func startStreamHarnessWith(t *testing.T, srv *kinesisfake.Server, extra string, store checkpoint.Store, mk func(*kinesisInput, *kinesis.Client) recordPublisher) *streamHarness {
	t.Helper()
	return startStreamHarnessCP(t, srv, "", extra, store, mk)
}

// startStreamHarnessCP adds cpExtra (e.g. "limit: 10") to the checkpoint
// settings.
func startStreamHarnessCP(t *testing.T, srv *kinesisfake.Server, cpExtra, extra string, store checkpoint.Store, mk func(*kinesisInput, *kinesis.Client) recordPublisher) *streamHarness {
	t.Helper()
	if cpExtra != "" {
		cpExtra = ", " + cpExtra
	}
	in, err := newTestInput(t, fakeYAML(srv, "orders", fmt.Sprintf("{ dir: '%s', commit_period: 100ms%s }", t.TempDir(), cpExtra), "reader: polling\n"+extra))
	if err != nil {
		t.Fatal(err)
	}
	in.store = store
	h := &streamHarness{in: in}
	client := srv.NewClient()
	h.s = &streamReader{in: in, name: "orders", arn: srv.StreamARN("orders"), client: client, pub: mk(in, client)}
	ctx, cancel := context.WithCancel(in.ctx)
	h.cancel = cancel
	if err := h.s.load(ctx); err != nil {
		t.Fatal(err)
	}
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.s.run(ctx) }()
	go func() {
		defer h.wg.Done()
		for {
			select {
			case d := <-in.out:
				h.mu.Lock()
				h.sizes = append(h.sizes, len(d.batch))
				for _, m := range d.batch {
					b, _ := m.AsBytes()
					h.got = append(h.got, string(b))
				}
				h.mu.Unlock()
				d.ack(nil)
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { h.cancel(); h.wg.Wait() })
	return h
}

func reviewRecord(seq, data string) types.Record {
	return types.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte(data)}
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
	srv := newFake(t, kinesisfake.Stream("orders", 2))
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

	startStreamHarness(t, srv, "shard_discovery_interval: 1h", mustOpenStore(t), pub)
	// Wait until both shards are being read (discovery and pinning done).
	waitUntil(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 2 })

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
	waitUntil(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); _, ok := ended[s1]; return ok })
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
	srv := newFake(t, kinesisfake.Stream("orders", 1))
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
	store := &endFailingStore{Store: mustOpenStore(t)}
	startStreamHarness(t, srv, "shard_discovery_interval: 1s", store, pub)

	waitUntil(t, 10*time.Second, func() bool { return store.failed() > 0 })
	time.Sleep(2500 * time.Millisecond) // two discovery ticks
	mu.Lock()
	defer mu.Unlock()
	for _, c := range children {
		if started[c] {
			t.Fatalf("child %s is being read although the end of its parent %s was never checkpointed (%d failed commits of it)", c, s0, store.failed())
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

func mustOpenStore(t *testing.T) *checkpoint.File {
	t.Helper()
	f, err := checkpoint.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func waitUntil(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	if !eventually(within, cond) {
		t.Fatalf("condition not met within %v", within)
	}
}

// eventually reports whether cond became true within the time given.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
