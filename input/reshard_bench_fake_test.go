package input

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// BenchmarkChildWaitAfterSplit measures what reading a child shard only
// after its parent is finished costs a reader that keeps up: a shard is
// written 200 records a second and split after 1.5 s; it reports the p99
// latency (put to pipeline) of the parent's records, the worst latency of
// the children's (those written just after the split wait for the parent's
// end to be read and stored), and when the first child record came after
// the split. Run it with -benchtime 1x (each iteration takes 3 s):
//
//	go test ./input -run '^$' -bench ChildWaitAfterSplit -benchtime 1x
func BenchmarkChildWaitAfterSplit(b *testing.B) {
	for _, reader := range []string{"polling", "efo"} {
		b.Run(reader, func(b *testing.B) {
			var parent, child, first []time.Duration
			for range b.N {
				p, c, f := childWait(b, reader)
				parent, child, first = append(parent, p), append(child, c), append(first, f)
			}
			ms := func(ds []time.Duration) float64 { return float64(slices.Max(ds)) / float64(time.Millisecond) }
			b.ReportMetric(ms(parent), "parent-p99-ms")
			b.ReportMetric(ms(child), "child-max-ms")
			b.ReportMetric(ms(first), "first-child-ms")
		})
	}
}

// childWait runs one split under load and returns the parent's p99
// latency, the children's worst, and when the first child record came
// after the split.
func childWait(b *testing.B, reader string) (parentP99, childMax, firstChild time.Duration) {
	srv := inputtest.NewFake(b, kinesisfake.Stream("orders", 1))
	var mu sync.Mutex
	type got struct {
		shard    string
		put, out time.Time
	}
	var all []got
	consume := func(_ context.Context, batch service.MessageBatch) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range batch {
			data, _ := m.AsBytes()
			_, stamp, _ := strings.Cut(string(data), "-")
			ns, _ := strconv.ParseInt(stamp, 10, 64)
			shard, _ := m.MetaGet("kinesis_shard")
			all = append(all, got{shard, time.Unix(0, ns), now})
		}
		return nil
	}
	extra := "reader: polling"
	if reader == "efo" {
		extra = "efo: { consumer_name: app }"
	}
	p := inputtest.StartPipelineWith(b, fakeInput(srv, "orders", b.TempDir(), extra), consume, inputtest.Options{})
	start := time.Now()
	var splitAt time.Time
	n := 0
	for tick := time.NewTicker(5 * time.Millisecond); time.Since(start) < 3*time.Second; <-tick.C {
		if splitAt.IsZero() && time.Since(start) > 1500*time.Millisecond {
			splitAt = time.Now()
			if _, err := srv.SplitShard("orders", "shardId-000000000000", ""); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := srv.Put("orders", "k"+strconv.Itoa(n%50), fmt.Appendf(nil, "%d-%d", n, time.Now().UnixNano())); err != nil {
			b.Fatal(err)
		}
		n++
	}
	inputtest.WaitUntil(b, time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(all) >= n })
	p.Stop(b)
	var parent []time.Duration
	firstChild = time.Hour
	for _, g := range all {
		lat := g.out.Sub(g.put)
		if g.shard == "shardId-000000000000" {
			if g.put.After(start.Add(500 * time.Millisecond)) { // past the start-up
				parent = append(parent, lat)
			}
			continue
		}
		childMax = max(childMax, lat)
		firstChild = min(firstChild, g.out.Sub(splitAt))
	}
	slices.Sort(parent)
	return parent[len(parent)*99/100], childMax, firstChild
}
