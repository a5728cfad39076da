package input

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// rejectOnce makes out reject, once each, the first batch holding a record
// whose index (data "<prefix>-<index>") is a multiple of every. It returns
// the number of rejections so far.
func rejectOnce(out *inputtest.Collector, every int) func() int {
	var mu sync.Mutex
	done := map[string]bool{}
	out.Reject = func(b []inputtest.Got) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b {
			i, err := strconv.Atoi(m.Data[strings.LastIndexByte(m.Data, '-')+1:])
			if err == nil && i%every == 0 && !done[m.Data] {
				done[m.Data] = true
				return true
			}
		}
		return false
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return len(done) }
}

// nackedRun reads 2,000 records of a one-shard stream from the fake through
// a pipeline of threads threads and a slow output writing one batch at a
// time, which rejects once each batch holding a record whose index is a
// multiple of 97. It checks exactly-once delivery and returns how often a
// record reached the output after a later record of its shard.
func nackedRun(t *testing.T, reader string, threads int, strict bool) int {
	t.Helper()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "r", 2000, 40)
	out := &inputtest.Collector{Slow: 5 * time.Millisecond}
	rejected := rejectOnce(out, 97)
	conf := fakeYAML(srv, "orders", fmt.Sprintf("{ dir: '%s', limit: 50 }", t.TempDir()), fmt.Sprintf("%s\nstrict_order: %v", reader, strict))
	p := inputtest.StartPipelineThreads(t, conf, out, threads, "noop: {}")
	p.StopWhen(t, out, len(want), time.Minute)
	if n := rejected(); n < 20 {
		t.Fatalf("only %d batches were rejected", n)
	}
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	overtaken := 0
	for i := 1; i < len(msgs); i++ {
		if !msgs[i-1].Position().Less(msgs[i].Position()) {
			overtaken++
		}
	}
	return overtaken
}

// TestStrictOrderHoldsAcrossNacks: with strict_order, a rejected batch is
// written before any later record of its shard, with one pipeline thread or
// several. Without it the input keeps several batches of a shard in flight,
// and a batch rejected once is written after the shard's next ones (seen as
// r-0000050 after r-0000089 with one thread and an output writing one batch
// at a time; TestWithoutStrictOrderBatchesOvertakeAReplay shows it here).
func TestStrictOrderHoldsAcrossNacks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, reader string
		threads      int
	}{
		{"efo", "efo: { consumer_name: app }", 1},
		{"polling", "reader: polling", 1},
		{"efo, 4 threads", "efo: { consumer_name: app }", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if n := nackedRun(t, c.reader, c.threads, true); n > 0 {
				t.Fatalf("with strict_order, %d times a record reached the output after a later record of its shard", n)
			}
		})
	}
}

// TestWithoutStrictOrderBatchesOvertakeAReplay documents why strict_order
// exists, and that the run above does catch a broken order: without it,
// batches rejected once reach the output after later batches of their shard.
func TestWithoutStrictOrderBatchesOvertakeAReplay(t *testing.T) {
	t.Parallel()
	n := nackedRun(t, "efo: { consumer_name: app }", 1, false)
	if n == 0 {
		t.Fatal("no replay came after a later batch: the run no longer shows what strict_order prevents")
	}
	t.Logf("%d times a record came after a later record of its shard", n)
}

// TestStrictOrderWithBatchPolicy: strict_order with a batch policy
// (count and period) and nacks replayed: every record once, in shard order.
func TestStrictOrderWithBatchPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, extra string }{
		{"count+period", "batching: { count: 7, period: 20ms }"},
		{"period only", "batching: { period: 5ms }"},
		{"count over limit", "batching: { count: 80, period: 20ms }"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
			want := fakeProduce(t, srv, "orders", "r", 1000, 40)
			out := &inputtest.Collector{Slow: 2 * time.Millisecond}
			rejected := rejectOnce(out, 97)
			conf := fakeYAML(srv, "orders", fmt.Sprintf("{ dir: '%s', limit: 50 }", t.TempDir()), "reader: polling\nstrict_order: true\n"+c.extra)
			p := inputtest.StartPipelineThreads(t, conf, out, 2, "noop: {}")
			p.StopWhen(t, out, len(want), time.Minute)
			if rejected() < 5 {
				t.Fatalf("only %d rejections", rejected())
			}
			msgs := out.All()
			inputtest.CheckDelivery(t, msgs, want, true)
			for i := 1; i < len(msgs); i++ {
				if !msgs[i-1].Position().Less(msgs[i].Position()) {
					t.Fatalf("out of order at %d", i)
				}
			}
		})
	}
}
