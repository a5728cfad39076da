package input

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/input/read"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

func TestReplayDelayGrowsWithinBounds(t *testing.T) {
	if d := replayDelay(1); d != 0 {
		t.Fatalf("first replay after %v, want at once", d)
	}
	for attempts := 2; attempts < 40; attempts++ {
		full := min(replayInitial<<min(attempts-2, 10), replayMax)
		for range 50 {
			if d := replayDelay(attempts); d < full/2 || d > full {
				t.Fatalf("replay %d after %v, want within [%v, %v]", attempts, d, full/2, full)
			}
		}
	}
}

func TestReplaysComeDueInTime(t *testing.T) {
	q := newReplays()
	now := time.Now()
	a, b := &replay{attempts: 3}, &replay{} // a waits 200-400 ms, b not at all
	q.add(a, now)
	q.add(b, now)
	if r, _ := q.next(now); r != b {
		t.Fatal("the batch due at once was not handed out first")
	}
	r, wait := q.next(now)
	if r != nil || wait < 200*time.Millisecond || wait > 400*time.Millisecond {
		t.Fatalf("got %v, wait %v: want nothing due for 200-400 ms", r, wait)
	}
	if r, _ := q.next(now.Add(wait)); r != a {
		t.Fatal("the waiting batch was not handed out once due")
	}
	if r, wait := q.next(now.Add(time.Hour)); r != nil || wait != 0 {
		t.Fatalf("got %v, wait %v from an empty queue", r, wait)
	}
}

// TestStopWhileBatchesAreRejected: a pipeline whose output rejects every
// batch past a point stops cleanly while the rejected batches wait for their
// replay, its checkpoint stays at the last accepted record, and the next run
// delivers the rest exactly once. (Benthos' own nack-replay wrapper hung such
// stops now and then: TestEFORestartInsideAggregate did, 2 runs in 3.)
func TestStopWhileBatchesAreRejected(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "r", 300, 7)
	dir := t.TempDir()
	conf := fakeYAML(srv, "orders", "{ dir: '"+dir+"', commit_period: 100ms, limit: 20 }", "reader: polling\npolling: { limit: 10 }\nbatching: { count: 7, period: 200ms }")

	first := &inputtest.Collector{}
	rejections := 0
	first.Reject = func([]inputtest.Got) bool {
		if len(first.Msgs()) < 50 {
			return false
		}
		rejections++
		return true
	}
	p := inputtest.StartPipeline(t, conf, first)
	// Stop once a replay has been rejected again (the pauses begin then).
	inputtest.WaitUntil(t, time.Minute, func() bool {
		first.Lock()
		defer first.Unlock()
		return rejections >= 4
	})
	p.Stop(t)
	accepted := first.All()
	last := accepted[len(accepted)-1]
	cp := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders")).Shards["shardId-000000000000"].Position
	if cp == nil || cp.Sequence != last.Seq {
		t.Fatalf("the checkpoint is %+v, want the last accepted record %s", cp, last.Seq)
	}

	second := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, second)
	p.StopWhen(t, second, len(want)-len(accepted), time.Minute)
	inputtest.CheckDelivery(t, append(accepted, second.All()...), want, true)
}

// TestPartialNackReplaysOnlyTheFailedMessages: an output that fails one
// message of a batch (a service.BatchError with an indexed error) gets only
// that message again, not the ones it accepted (as Benthos' own nack-replay
// wrapper did; the input's first replay sent the whole batch each time).
func TestPartialNackReplaysOnlyTheFailedMessages(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "r", 10, 1)
	conf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms }", "reader: polling\nbatching: { count: 10 }")

	var mu sync.Mutex
	seen := map[string]int{}
	accepted := map[string]bool{}
	failures := 0
	consume := func(_ context.Context, b service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		var berr *service.BatchError
		for i, m := range b {
			d, _ := m.AsBytes()
			seen[string(d)]++
			if string(d) == "r-0000003" && failures < 3 {
				failures++
				e := errors.New("r-0000003 refused")
				berr = service.NewBatchError(b, e).Failed(i, e)
			}
		}
		for _, m := range b {
			d, _ := m.AsBytes()
			if berr == nil || string(d) != "r-0000003" {
				accepted[string(d)] = true
			}
		}
		if berr != nil {
			return berr
		}
		return nil
	}

	p := inputtest.StartPipelineFunc(t, conf, consume, nil)
	inputtest.WaitUntil(t, time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) == len(want) && failures == 3
	})
	time.Sleep(300 * time.Millisecond) // a stray replay would show
	p.Stop(t)
	mu.Lock()
	defer mu.Unlock()
	for d := range want {
		if n := seen[d]; d != "r-0000003" && n != 1 {
			t.Errorf("%s reached the output %d times, want once: the messages the output accepted came again", d, n)
		}
	}
	if n := seen["r-0000003"]; n != 4 {
		t.Errorf("the failing message reached the output %d times, want 4 (3 failures, then success)", n)
	}
}

// replayTestInput is an input with nothing running: the test plays the shard
// readers by sending on out.
func replayTestInput(replay bool) *kinesisInput {
	ctx, cancel := context.WithCancel(context.Background())
	return &kinesisInput{conf: config{ReplayNacks: replay}, log: service.MockResources().Logger(), ctx: ctx, cancel: cancel, out: make(chan read.Delivery), replays: newReplays(), health: newInputHealth(), mem: &memoryPlan{}}
}

func replayTestBatch(data string) service.MessageBatch {
	return service.MessageBatch{service.NewMessage([]byte(data))}
}

// replayTestDelivery is a batch of one message from a shard reader whose
// grant never lapses.
func replayTestDelivery(data string) read.Delivery {
	return &testDelivery{batch: replayTestBatch(data)}
}

func replayTestRead(t *testing.T, in *kinesisInput) (string, service.AckFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, ack, err := in.ReadBatch(ctx)
	if err != nil {
		t.Fatalf("ReadBatch: %v", err)
	}
	d, _ := b[0].AsBytes()
	return string(d), ack
}

// TestDueReplayComesBeforeNewerBatches: once its pause is over, a rejected
// batch comes before newer ones.
func TestDueReplayComesBeforeNewerBatches(t *testing.T) {
	in := replayTestInput(true)
	defer in.cancel()
	go func() { in.out <- replayTestDelivery("old") }()
	d, ack := replayTestRead(t, in)
	if d != "old" {
		t.Fatalf("read %q", d)
	}
	_ = ack(context.Background(), errors.New("nack 1")) // replayed at once
	d, ack = replayTestRead(t, in)
	if d != "old" {
		t.Fatalf("read %q, want the replay of old", d)
	}
	_ = ack(context.Background(), errors.New("nack 2")) // replayed after 50-100 ms
	time.Sleep(150 * time.Millisecond)                  // the replay is due
	go func() { in.out <- replayTestDelivery("new") }()
	if d, _ = replayTestRead(t, in); d != "old" {
		t.Errorf("read %q before the due replay of old", d)
	}
}

// TestReadBatchAfterEndHandsOutNoReplay: once its context or the input has
// ended, ReadBatch hands out nothing, not even a replay that is due (Benthos
// would drop a batch read after its soft stop without resolving it).
func TestReadBatchAfterEndHandsOutNoReplay(t *testing.T) {
	in := replayTestInput(true)
	go func() { in.out <- replayTestDelivery("old") }()
	_, ack := replayTestRead(t, in)
	_ = ack(context.Background(), errors.New("nack")) // due at once
	in.cancel()                                       // as Close does
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, _, err := in.ReadBatch(ctx)
	if err == nil {
		t.Errorf("ReadBatch after the input's end and with its context done handed out a batch of %d", len(b))
	}
}

// TestPersistentRejectionDoesNotStopTheShard: behind a batch the output
// rejects every time (a poison record), the shard reads and delivers on, and
// its checkpoint stays before the rejected record. Every record read past
// the stuck checkpoint would come again after a restart, and the input says
// so: the gauge kinesis_records_past_checkpoint counts them and a warning
// comes once they pass ten times checkpoint.limit. (Before the fix the ack
// tracker also kept one queue entry per later batch: see
// TestAckTrackerMemoryBehindAStuckBatch.) Once the record is accepted, the
// checkpoint moves to the end and the gauge drops to zero.
func TestPersistentRejectionDoesNotStopTheShard(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "r", 300, 7)
	dir := t.TempDir()
	conf := fakeYAML(srv, "orders", "{ dir: '"+dir+"', commit_period: 100ms, limit: 20 }", "reader: polling\npolling: { limit: 10 }")
	out := &inputtest.Collector{}
	var poison inputtest.Got
	rejected := 0
	poisoned := true
	out.Reject = func(b []inputtest.Got) bool {
		for _, m := range b {
			if m.Data == "r-0000005" && poisoned {
				poison, rejected = m, len(b)
				return true
			}
		}
		return false
	}
	logs := &inputtest.Logs{}
	metrics := &inputtest.Metrics{}
	p := inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
	past := func() int64 { return metrics.Counter("kinesis_records_past_checkpoint", "stream", "orders") }
	// Everything but the poisoned batch (of at most 10 records, so the shard
	// has room to read on) arrives; the records past the checkpoint are all
	// of them from the poisoned batch on.
	inputtest.WaitUntil(t, time.Minute, func() bool {
		out.Lock()
		defer out.Unlock()
		return rejected > 0 && len(out.Msgs())+rejected == len(want) && past() >= int64(len(want)-5)
	})
	if !strings.Contains(logs.String(), "records were read past the shard's checkpoint") {
		t.Fatalf("no warning about the records piling up past the stuck checkpoint; logs:\n%s", logs)
	}
	if !inputtest.AfterCheckpoint(poison, inputtest.ReadCheckpointsUnlocked(t, dir, srv.StreamARN("orders"))) {
		t.Fatalf("the checkpoint passed the always rejected record %s (seq %s)", poison.Data, poison.Seq)
	}

	out.Lock()
	poisoned = false
	out.Unlock()
	p.StopWhen(t, out, len(want), time.Minute)
	inputtest.CheckDelivery(t, out.All(), want, true)
	if n := past(); n != 0 {
		t.Fatalf("kinesis_records_past_checkpoint is %d once everything was acknowledged", n)
	}
	cps := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))
	for _, m := range out.All() {
		if inputtest.AfterCheckpoint(m, cps) {
			t.Fatalf("record %s is after the final checkpoint %+v", m.Data, cps.Shards)
		}
	}
}
