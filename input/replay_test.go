package input

import (
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
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
	srv := newFake(t, kinesisfake.Stream("orders", 1))
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
	waitUntil(t, time.Minute, func() bool {
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
