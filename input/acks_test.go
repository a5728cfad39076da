package input

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

func TestAckTrackerOutOfOrderAcks(t *testing.T) {
	tr := newAckTracker(100)
	ctx := context.Background()
	var es []*tracked
	for i := 1; i <= 5; i++ {
		e, err := tr.Track(ctx, pos(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if _, moved := tr.Ack(es[2], nil); moved {
		t.Fatal("checkpoint moved past unacknowledged batches 1 and 2")
	}
	if p, moved := tr.Ack(es[0], nil); !moved || p != pos(1) {
		t.Fatalf("after acking 1: %v %v", p, moved)
	}
	if p, moved := tr.Ack(es[1], nil); !moved || p != pos(3) {
		t.Fatalf("after acking 2 (3 already acked): %v %v", p, moved)
	}
	tr.Ack(es[4], nil)
	if got := tr.Checkpoint(); *got != pos(3) {
		t.Fatalf("checkpoint %v passed unacknowledged 4", got)
	}
	if p, _ := tr.Ack(es[3], nil); p != pos(5) {
		t.Fatalf("final checkpoint %v", p)
	}
	if err := tr.Drained(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAckTrackerNackFreezes(t *testing.T) {
	tr := newAckTracker(100)
	ctx := context.Background()
	e1, _ := tr.Track(ctx, pos(1), 1)
	e2, _ := tr.Track(ctx, pos(2), 1)
	e3, _ := tr.Track(ctx, pos(3), 1)
	tr.Ack(e2, errors.New("rejected"))
	tr.Ack(e3, nil)
	if p, _ := tr.Ack(e1, nil); p != pos(1) {
		t.Fatalf("checkpoint %v, want 1 (2 was nacked)", p)
	}
	e4, _ := tr.Track(ctx, pos(4), 1)
	tr.Ack(e4, nil)
	if got := tr.Checkpoint(); *got != pos(1) {
		t.Fatalf("checkpoint passed a nacked record: %v", got)
	}
	if !tr.Frozen() {
		t.Fatal("not frozen")
	}
	ctx2, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := tr.Drained(ctx2); err == nil {
		t.Fatal("a frozen tracker reported drained: the shard would be ended past a nacked record")
	}
}

func TestAckTrackerLimitBlocks(t *testing.T) {
	tr := newAckTracker(10)
	ctx := context.Background()
	e1, _ := tr.Track(ctx, pos(1), 6)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Track(tctx, pos(2), 5); err == nil {
		t.Fatal("Track admitted 11 unacknowledged records with a limit of 10")
	}
	done := make(chan *tracked)
	go func() {
		e, _ := tr.Track(ctx, pos(2), 5)
		done <- e
	}()
	select {
	case <-done:
		t.Fatal("Track did not wait for room")
	case <-time.After(20 * time.Millisecond):
	}
	tr.Ack(e1, nil)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Track did not wake after an ack")
	}
	// A batch larger than the limit is admitted alone.
	tr2 := newAckTracker(10)
	if _, err := tr2.Track(ctx, pos(1), 50); err != nil {
		t.Fatal(err)
	}
}

// TestAckTrackerRandomOrder acks many batches in random order from many
// goroutines: the checkpoint must only grow, never pass an unacknowledged
// batch, and end at the last one.
func TestAckTrackerRandomOrder(t *testing.T) {
	tr := newAckTracker(1 << 20)
	ctx := context.Background()
	const n = 2000
	es := make([]*tracked, n)
	for i := range es {
		es[i], _ = tr.Track(ctx, pos(i+1), 1)
	}
	acked := make([]bool, n)
	order := rand.Perm(n)
	last := 0
	for _, i := range order {
		acked[i] = true
		p, moved := tr.Ack(es[i], nil)
		if !moved {
			continue
		}
		got, _ := strconv.Atoi(p.Sequence)
		if got < last {
			t.Fatalf("checkpoint went back from %d to %d", last, got)
		}
		for j := 0; j < got; j++ {
			if !acked[j] {
				t.Fatalf("checkpoint %d passed unacknowledged %d", got, j+1)
			}
		}
		last = got
	}
	if last != n {
		t.Fatalf("final checkpoint %d, want %d", last, n)
	}
}

// Regression tests of checkpoint.limit against outputs that batch by count
// (no period) and so acknowledge only once more records come: the limit must
// never make the shard wait for acknowledgements that wait for the shard. A
// review proved each with a failing test: the first five against a version
// of the limit (since reverted) that counted acknowledged records behind an
// unacknowledged one; the last against reads emitted in batches larger than
// the room left.

// TestAckTrackerAcknowledgedRecordsFreeTheirRoom models a Benthos output with
// batching { count: 4 } (no period) behind pipeline.threads: 2, where the
// first record is slow in its thread: the output writes (and so acknowledges)
// records 2-5 and 6-9, then holds 10 and, once it arrives, 1, waiting for two
// more messages before it acknowledges them. Those two can only come from the
// shard, so the acknowledged records must free their room even though the
// checkpoint cannot pass record 1.
func TestAckTrackerAcknowledgedRecordsFreeTheirRoom(t *testing.T) {
	const limit, outCount = 10, 4
	tr := newAckTracker(limit)
	ctx := context.Background()
	es := make([]*tracked, 0, limit)
	for i := 1; i <= limit; i++ {
		e, err := tr.Track(ctx, pos(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	// Output batches {2,3,4,5} and {6,7,8,9} are written; {10,1} waits.
	for i := 2; i <= 9; i++ {
		tr.Ack(es[i-1], nil)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := tr.Track(tctx, pos(limit+1), 1); err != nil {
		t.Fatalf("with 2 records unacknowledged (both waiting in an output batch of %d for more) and checkpoint.limit %d, the shard cannot read its next record: %v", outCount, limit, err)
	}
}

// TestAckTrackerFreezeOfAFullBatchLeavesRoom: with auto_replay_nacks false
// a nack freezes the checkpoint and the shard reads on, also after the nack
// of a batch of checkpoint.limit records (what a busy shard emits): the
// nacked batch must not count against the limit for good.
func TestAckTrackerFreezeOfAFullBatchLeavesRoom(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, 10} {
		tr := newAckTracker(10)
		e, _ := tr.Track(ctx, pos(size), size)
		tr.Ack(e, errors.New("rejected"))
		for i := 1; i <= 3; i++ {
			tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			next, err := tr.Track(tctx, pos(size+i), 1)
			cancel()
			if err != nil {
				t.Fatalf("after the nack of a batch of %d (auto_replay_nacks false), the shard cannot read on (limit 10)", size)
			}
			tr.Ack(next, nil)
		}
	}
}

// TestFreezeDoesNotStopTheShard: a whole pipeline with
// auto_replay_nacks false, checkpoint.limit 10 and reads of 10 records. The
// output rejects the batch holding r-0000003 once; that record is not
// delivered again in this run, but the other 90 are.
func TestFreezeDoesNotStopTheShard(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "r", 100, 1)
	conf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 10 }", "reader: polling\npolling: { limit: 10 }\nauto_replay_nacks: false")
	out := &inputtest.Collector{}
	var once sync.Once
	out.Reject = func(b []inputtest.Got) bool {
		rejected := false
		for _, m := range b {
			if m.Data == "r-0000003" {
				once.Do(func() { rejected = true })
			}
		}
		return rejected
	}
	p := inputtest.StartPipeline(t, conf, out)
	ok := eventually(10*time.Second, func() bool { return out.Count() >= 90 })
	n := out.Count()
	p.Stop(t)
	if !ok {
		t.Fatalf("after one rejected batch of 10 with auto_replay_nacks false, only %d of the 90 later records were delivered in 10 s: the shard stopped", n)
	}
}

// countBatchSink is an output with its own batch policy (Benthos' output batcher
// in front of it), as e.g. aws_s3, kafka or http_client outputs have. fail,
// when set, may fail one message of a write (a service.BatchError naming it;
// the others are written).
type countBatchSink struct {
	mu      sync.Mutex
	data    []string
	batches []int
	fail    func(b service.MessageBatch) (int, error) // the index of the message that failed
}

func (s *countBatchSink) Connect(context.Context) error { return nil }
func (s *countBatchSink) Close(context.Context) error   { return nil }
func (s *countBatchSink) WriteBatch(_ context.Context, b service.MessageBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed, err := -1, error(nil)
	if s.fail != nil {
		failed, err = s.fail(b)
	}
	s.batches = append(s.batches, len(b))
	for i, m := range b {
		if i != failed {
			d, _ := m.AsBytes()
			s.data = append(s.data, string(d))
		}
	}
	if err != nil {
		return service.NewBatchError(b, err).Failed(failed, err)
	}
	return nil
}

func (s *countBatchSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data)
}

// runCountBatchStream runs a whole Benthos stream: the input's YAML, the pipeline
// section given, and sink as the output with batching { count: outCount } and
// no period. It waits until sink holds want records and fails the test if
// they do not come within 10 s. (The last records read may stay in a partial
// output batch for good: want leaves room for them.)
func runCountBatchStream(t *testing.T, inConf, pipeline string, outCount int, sink *countBatchSink, want int, why string, during func()) {
	t.Helper()
	env := service.NewEnvironment()
	spec := service.NewConfigSpec().Fields(service.NewBatchPolicyField("batching"))
	err := env.RegisterBatchOutput("count_batch_out", spec, func(conf *service.ParsedConfig, _ *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
		pol, err := conf.FieldBatchPolicy("batching")
		return sink, pol, 1, err
	})
	if err != nil {
		t.Fatal(err)
	}
	sb := env.NewStreamBuilder()
	if err := sb.SetLoggerYAML("level: warn"); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
input:
  aws_kinesis_streams:
%s
pipeline:
%s
output:
  count_batch_out:
    batching: { count: %d }
`, inputtest.Indent(strings.TrimSpace(inConf), "    "), inputtest.Indent(strings.TrimSpace(pipeline), "  "), outCount)
	if err := sb.SetYAML(yaml); err != nil {
		t.Fatal(err)
	}
	s, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	defer func() {
		// A partial output batch with no period holds Benthos' own shutdown
		// until its timeout (the input waits for pending acks first).
		_ = s.StopWithin(3 * time.Second)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the stream did not stop")
		}
	}()
	if during != nil {
		during()
	}
	if !eventually(10*time.Second, func() bool { return sink.count() >= want }) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		t.Errorf("%s: the shard stalled, %d of %d records written in 10 s, in output batches %v: %v", why, len(sink.data), want, sink.batches, sink.data)
	}
}

// TestOutOfOrderAcksIntoCountBatchingOutputDoNotStall: a real Benthos stream,
// pipeline.threads 2, an output with batching { count: 4 } (no period), one
// shard, checkpoint.limit 10, one record per input batch. The first record is
// slow to process (1 s, e.g. an HTTP enrichment), so records 2-9 overtake it
// and are written and acknowledged; 10 and then 1 wait in the output's batch
// for two more, which the shard must be free to read (2 records are
// unacknowledged).
func TestOutOfOrderAcksIntoCountBatchingOutputDoNotStall(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "r", 40, 1)
	// check: true flushes every record: one record per input batch (count: 1 is a no-op policy).
	inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 10 }", "reader: polling\nbatching: { check: 'true' }")
	runCountBatchStream(t, inConf, `
threads: 2
processors:
  - switch:
      - check: 'content().string() == "r-0000000"'
        processors:
          - sleep: { duration: 1s }
`, 4, &countBatchSink{}, 36, "pipeline.threads 2, output batching count 4, checkpoint.limit 10", nil)
}

// TestReplayIntoCountBatchingOutputDoesNotStall: the default settings
// (auto_replay_nacks true, one pipeline thread), an output with batching
// { count: 4 } (no period) that fails one message of its first two writes
// (a service.BatchError naming r-0000000: a transient error). The other
// messages of those writes are acknowledged. The replay of r-0000000 lands
// in a partial output batch that waits for more messages, which the shard
// must be free to read although the checkpoint cannot pass r-0000000 yet.
func TestReplayIntoCountBatchingOutputDoesNotStall(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "r", 40, 1)
	inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 9 }", "reader: polling\nbatching: { check: 'true' }")
	failures := 0
	sink := &countBatchSink{fail: func(b service.MessageBatch) (int, error) {
		for i, m := range b {
			if d, _ := m.AsBytes(); string(d) == "r-0000000" && failures < 2 {
				failures++
				return i, errors.New("r-0000000: transient failure")
			}
		}
		return -1, nil
	}}
	runCountBatchStream(t, inConf, "threads: 1", 4, sink, 36, "auto_replay_nacks, output batching count 4, checkpoint.limit 9, r-0000000 failing twice", nil)
}

// TestSmallThenLargeReadIntoCountBatchingOutputDoesNotStall: one pipeline
// thread, in order, no failure, an output with batching { count: 4 }, one
// shard, checkpoint.limit 10. A small read (3 records, e.g. at the tip of the
// shard) waits in the output's partial batch; the next read is larger than
// the room left (10 + 3 > 10) and is emitted as one batch, which Track never
// admits: it would need the 3 acknowledged, which needs 1 more message.
// emitRead splits the read by the room left, which lets it through.
func TestSmallThenLargeReadIntoCountBatchingOutputDoesNotStall(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "a", 3, 1)
	inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 10 }", "reader: polling")
	runCountBatchStream(t, inConf, "threads: 1", 4, &countBatchSink{}, 29, "reads of 3 then 30 records, output batching count 4, checkpoint.limit 10", func() {
		time.Sleep(2 * time.Second) // the 3 records wait in the output's batch
		fakeProduce(t, srv, "orders", "b", 30, 1)
	})
}

// TestAckTrackerMemoryBehindAStuckBatch: a batch that stays unacknowledged
// (a record the output keeps rejecting, replayed for ever) must not make
// every later acknowledged batch stay queued behind it. Before the fix,
// 200,000 later reads left 200,001 queue entries (about 73 bytes each); the
// queue now holds the unacknowledged batches and at most one merged run of
// acknowledged ones between them.
func TestAckTrackerMemoryBehindAStuckBatch(t *testing.T) {
	t.Parallel()
	tr := newAckTracker(1024)
	ctx := context.Background()
	stuck, _ := tr.Track(ctx, pos(0), 1)
	var inFlight []*tracked
	for i := 1; i <= 200_000; i++ {
		e, err := tr.Track(ctx, pos(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		inFlight = append(inFlight, e)
		if len(inFlight) == 8 { // acknowledged out of order, a few in flight
			for _, j := range []int{3, 0, 7, 1, 2, 6, 4, 5} {
				if _, moved := tr.Ack(inFlight[j], nil); moved {
					t.Fatal("the checkpoint passed the stuck batch")
				}
			}
			inFlight = inFlight[:0]
		}
		if tr.entries > 2+2*len(inFlight) {
			t.Fatalf("after %d reads the queue holds %d entries for %d unacknowledged batches", i, tr.entries, 1+len(inFlight))
		}
	}
	if got := tr.Behind(); got != 200_001 {
		t.Fatalf("%d records past the checkpoint, want 200001", got)
	}
	p, moved := tr.Ack(stuck, nil)
	if !moved || p != pos(200_000) {
		t.Fatalf("once the stuck batch is acknowledged the checkpoint is %v (moved %v), want 200000", p, moved)
	}
	if tr.entries != 0 || tr.Behind() != 0 {
		t.Fatalf("%d entries and %d records behind after everything was acknowledged", tr.entries, tr.Behind())
	}
}

// TestAckTrackerMergesInAnyOrder: whatever the order of acknowledgements,
// the checkpoint is the end of the longest acknowledged prefix, and the
// records behind it add up.
func TestAckTrackerMergesInAnyOrder(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := newAckTracker(1 << 20)
		ctx := context.Background()
		n := 1 + rng.IntN(40)
		es := make([]*tracked, n)
		sizes := make([]int, n)
		for i := range es {
			sizes[i] = 1 + rng.IntN(5)
			es[i], _ = tr.Track(ctx, pos(i), sizes[i])
		}
		acked := make([]bool, n)
		for _, i := range rng.Perm(n) {
			tr.Ack(es[i], nil)
			acked[i] = true
			prefix, behind := -1, 0
			for prefix+1 < n && acked[prefix+1] {
				prefix++
			}
			for j := prefix + 1; j < n; j++ {
				behind += sizes[j]
			}
			cp := tr.Checkpoint()
			if (prefix < 0) != (cp == nil) || (cp != nil && *cp != pos(prefix)) {
				t.Fatalf("seed %d: checkpoint %v, want the end of the acknowledged prefix %d", seed, cp, prefix)
			}
			if tr.Behind() != behind {
				t.Fatalf("seed %d: %d records behind, want %d", seed, tr.Behind(), behind)
			}
		}
	}
}
