package input

import (
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
)

func TestGoMemoryLimitIsTheInputsLimitsAndTheRest(t *testing.T) {
	a, b := &kinesisInput{}, &kinesisInput{}
	const mib = 1 << 20
	for _, c := range []struct {
		name   string
		inputs map[*kinesisInput]inputMemory
		want   int64
	}{
		{"no input", nil, math.MaxInt64},
		{"one input", map[*kinesisInput]inputMemory{a: {limit: 64 * mib}}, 88 * mib},
		{"two inputs", map[*kinesisInput]inputMemory{a: {limit: 64 * mib}, b: {limit: 32 * mib}}, 120 * mib},
		{"one unlimited", map[*kinesisInput]inputMemory{a: {limit: 64 * mib}, b: {}}, math.MaxInt64},
		// 512 shards by fan-out, 40 MiB of their own: within 5/8 of 64 MiB.
		{"shards within 5/8", map[*kinesisInput]inputMemory{a: {limit: 64 * mib, own: 40 * mib}}, 88 * mib},
		// 1,024 shards by fan-out: 80 MiB, 40 beyond 5/8 of 64 MiB.
		{"shards beyond 5/8", map[*kinesisInput]inputMemory{a: {limit: 64 * mib, own: 80 * mib}}, 128 * mib},
		{"each input's own", map[*kinesisInput]inputMemory{a: {limit: 64 * mib, own: 80 * mib}, b: {limit: 32 * mib, own: 30 * mib}}, (24 + 64 + 40 + 32 + 10) * mib},
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
	in := &kinesisInput{
		conf: config{MemoryLimit: 64 << 20, Reader: readerEFO},
		log:  service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil))),
	}
	openForGoMemoryLimit(in, in.conf.MemoryLimit)
	t.Cleanup(func() {
		closedForGoMemoryLimit(in)
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
	steps := []struct {
		shards   int
		soft     int64 // MiB
		warnings int   // so far
		last     string
	}{
		{256, 88, 0, ""}, // 20 MiB of their own
		{409, 88, 0, ""}, // 31.95 MiB: not yet half
		{410, 88, 1, "410 shards by efo, whose own state (goroutines, connections, buffers: about 80 KiB a shard) takes about 33MiB, more than half of memory_limit (64MiB)"},
		{512, 88, 1, ""}, // 40 MiB: 5/8, nothing beyond
		{1024, 128, 2, "the Go soft memory limit is raised by 40MiB to 128MiB"},
		{1000, 126, 2, ""}, // lower, said once
		{100, 88, 2, ""},   // under a quarter: said again next time
		{1024, 128, 4, "raised by 40MiB to 128MiB"},
	}
	for _, s := range steps {
		in.shardsRead(s.shards)
		if got := soft(); got != s.soft {
			t.Errorf("%d shards: soft limit %d MiB, want %d", s.shards, got, s.soft)
		}
		w := warnings()
		if len(w) != s.warnings {
			t.Fatalf("%d shards: %d warnings, want %d:\n%s", s.shards, len(w), s.warnings, strings.Join(w, "\n"))
		}
		if s.last != "" && !strings.Contains(w[len(w)-1], s.last) {
			t.Errorf("%d shards: the last warning is\n%s\nwant it to say %q", s.shards, w[len(w)-1], s.last)
		}
	}
}
