package input

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
)

func TestGoMemoryLimitIsTheInputsLimitsAndTheRest(t *testing.T) {
	a, b := &memoryPlan{}, &memoryPlan{}
	const mib = 1 << 20
	for _, c := range []struct {
		name   string
		inputs map[*memoryPlan]inputMemory
		want   int64
	}{
		{"no input", nil, math.MaxInt64},
		{"one input", map[*memoryPlan]inputMemory{a: {limit: 64 * mib}}, 88 * mib},
		{"two inputs", map[*memoryPlan]inputMemory{a: {limit: 64 * mib}, b: {limit: 32 * mib}}, 120 * mib},
		{"one unlimited", map[*memoryPlan]inputMemory{a: {limit: 64 * mib}, b: {}}, math.MaxInt64},
		// 512 shards by fan-out, 40 MiB of their own: within 5/8 of 64 MiB.
		{"shards within 5/8", map[*memoryPlan]inputMemory{a: {limit: 64 * mib, own: 40 * mib}}, 88 * mib},
		// 1,024 shards by fan-out: 80 MiB, 40 beyond 5/8 of 64 MiB.
		{"shards beyond 5/8", map[*memoryPlan]inputMemory{a: {limit: 64 * mib, own: 80 * mib}}, 128 * mib},
		{"each input's own", map[*memoryPlan]inputMemory{a: {limit: 64 * mib, own: 80 * mib}, b: {limit: 32 * mib, own: 30 * mib}}, (24 + 64 + 40 + 32 + 10) * mib},
	} {
		if got := goMemoryLimitFor(c.inputs); got != c.want {
			t.Errorf("%s: soft limit %d MiB, want %d MiB", c.name, got/mib, c.want/mib)
		}
	}
}

// TestManyShardsRaiseTheSoftLimitAndSaySo: as an input reads more shards,
// their own state counts in the soft memory limit beyond 5/8 of
// memory_limit; a warning says when it passes half of memory_limit and
// when it raises the soft limit, each once until the shards are few again.
func TestManyShardsRaiseTheSoftLimitAndSaySo(t *testing.T) {
	// Not parallel: the soft limit is the process's.
	goMemoryLimit.mu.Lock()
	managed := goMemoryLimit.managed
	goMemoryLimit.managed = true
	goMemoryLimit.mu.Unlock()
	logs := &inputtest.Logs{}
	in := &memoryPlan{
		limit:   64 << 20,
		reader:  readerEFO,
		log:     service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil))),
		closing: t.Context(),
		budget:  membudget.New(24<<20, nil),
		metrics: newMetrics(service.MockResources().Metrics()),
	}
	openForGoMemoryLimit(in)
	t.Cleanup(func() {
		in.close()
		goMemoryLimit.mu.Lock()
		goMemoryLimit.managed = managed
		goMemoryLimit.mu.Unlock()
	})
	soft := func() int64 {
		goMemoryLimit.mu.Lock()
		defer goMemoryLimit.mu.Unlock()
		return goMemoryLimitFor(goMemoryLimit.inputs) >> 20
	}
	warnings := func() []string {
		var w []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") {
				w = append(w, l)
			}
		}
		return w
	}
	// Each step: the count changes (at once, the soft limit), then stays
	// put (warnOwn, which the timer calls after ownSettle).
	steps := []struct {
		shards   int
		soft     int64 // MiB
		warnings int   // so far
		last     string
		later    time.Duration // since the last step: for ownWarnAgain
	}{
		{256, 88, 0, "", 0}, // 20 MiB of their own
		{409, 88, 0, "", 0}, // 31.95 MiB: not yet half
		{1024, 128, 2, "1024 shards by efo, whose own state (goroutines, connections, buffers: about 80 KiB a shard) takes about 80MiB, more than half of memory_limit (64MiB): the records in flight get only 8MiB of it (kinesis_bytes_in_flight_limit), in smaller reads, and the Go heap little room to grow between collections, so reading slows. A memory_limit of 160MiB or more", 0},
		{1000, 126, 2, "", 0}, // lower, said once
		{100, 88, 2, "", 0},   // under a quarter: may be said again
		{1024, 128, 2, "", 0}, // but not within ownWarnAgain
		{100, 88, 2, "", 0},
		{1024, 128, 4, "the Go soft memory limit is raised by 40MiB to 128MiB", ownWarnAgain},
	}
	for _, s := range steps {
		if s.later > 0 {
			in.own.mu.Lock()
			in.own.warnedAt = in.own.warnedAt.Add(-s.later)
			in.own.raisedAt = in.own.raisedAt.Add(-s.later)
			in.own.mu.Unlock()
		}
		before := len(warnings())
		in.shardsRead(s.shards)
		if n := len(warnings()); n != before {
			t.Fatalf("%d shards: warned before the count stayed put", s.shards)
		}
		if got := soft(); got != s.soft {
			t.Errorf("%d shards: soft limit %d MiB, want %d", s.shards, got, s.soft)
		}
		in.warnOwn()
		w := warnings()
		if len(w) != s.warnings {
			t.Fatalf("%d shards: %d warnings, want %d:\n%s", s.shards, len(w), s.warnings, strings.Join(w, "\n"))
		}
		if s.last != "" && !strings.Contains(strings.Join(w, "\n"), s.last) {
			t.Errorf("%d shards: the warnings are\n%s\nwant one to say %q", s.shards, strings.Join(w, "\n"), s.last)
		}
	}

	// Without the soft limit (GOMEMLIMIT set, or the input closed) the
	// shards' state changes nothing the warnings speak of.
	closedForGoMemoryLimit(in)
	in.shardsRead(100)
	in.warnOwn()
	in.own.mu.Lock()
	in.own.warnedAt = in.own.warnedAt.Add(-ownWarnAgain)
	in.own.raisedAt = in.own.raisedAt.Add(-ownWarnAgain)
	in.own.mu.Unlock()
	in.shardsRead(2048)
	in.warnOwn()
	if w := warnings(); len(w) != 4 {
		t.Errorf("without a soft limit: %d warnings, want the 4 before:\n%s", len(w), strings.Join(w, "\n"))
	}
}

// TestShardsTakeTheirStateFromTheHeapThenTheRecords: a shard's own state
// comes out of the heap's half up to a quarter of memory_limit, then out
// of the records' part, down to an eighth of memory_limit.
func TestShardsTakeTheirStateFromTheHeapThenTheRecords(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name                   string
		limit, windows, shards int64
		reader                 *readerKind
		want                   int64
	}{
		{"4 shards by polling", 64 * mib, 0, 4, readerPolling, 32 * mib},
		{"256 by polling: a quarter, from the heap", 64 * mib, 0, 256, readerPolling, 32 * mib},
		{"512 by polling", 64 * mib, 0, 512, readerPolling, 16 * mib},
		{"256 by fan-out", 64 * mib, 8 * mib, 256, readerEFO, 20 * mib},
		{"512 by fan-out: the floor", 64 * mib, 8 * mib, 512, readerEFO, 8 * mib},
		{"1,024 by polling: the floor", 64 * mib, 0, 1024, readerPolling, 8 * mib},
		{"512 by fan-out in 256 MiB: no change", 256 * mib, 32 * mib, 512, readerEFO, 96 * mib},
	} {
		if got := recordsRoom(c.limit, c.windows, c.shards*c.reader.shardOwn); got != c.want {
			t.Errorf("%s: room %.2f MiB, want %.2f MiB", c.name, float64(got)/mib, float64(c.want)/mib)
		}
	}
}

// TestSizesInWarningsKeepSmallFigures: the warnings' sizes are MiB rounded
// up, and below a MiB KiB, below a KiB bytes. Before, a memory_limit of
// 1KiB read "1MiB" and its records' share "0MiB".
func TestSizesInWarningsKeepSmallFigures(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1: "1B", 1023: "1023B", 1024: "1KiB", 1025: "2KiB", 512 << 10: "512KiB", 1 << 20: "1MiB", 1<<20 + 1: "2MiB", 64 << 20: "64MiB"} {
		if got := mibs(n); got != want {
			t.Errorf("mibs(%d) = %s, want %s", n, got, want)
		}
	}
}
