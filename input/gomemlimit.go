package input

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// restOfProcess is what a binary running inputs holds besides their
// records and shards, for the Go runtime's soft memory limit: its heap at
// rest (about 15 MiB with Benthos' components and the SDK loaded), and some
// room beyond.
const restOfProcess = 24 << 20

// goMemoryLimit sets the Go runtime's soft memory limit from the inputs'
// memory_limit and shards, once a binary has asked for it
// (ManageGoMemoryLimit).
var goMemoryLimit struct {
	mu      sync.Mutex
	managed bool
	inputs  map[*memoryPlan]inputMemory
}

// inputMemory is what an input open counts for in the soft limit.
type inputMemory struct {
	limit int64 // memory_limit; 0: none
	own   int64 // what its shards hold besides their records (shardOwn)
}

// ManageGoMemoryLimit lets the inputs of this process set the Go runtime's
// soft memory limit (runtime/debug.SetMemoryLimit) to the sum of their
// memory_limit plus 24 MiB for the rest of the process, unless GOMEMLIMIT
// is set or an input has no limit. A binary that runs nothing but pipelines
// calls it once before it starts them. Half of memory_limit bounds the
// records in flight; the other half is what the heap grows by between
// collections: without a soft limit the Go heap grows to twice what is
// live, the whole process's, before it is collected. The shards' own state
// comes out of that half; what goes beyond 5/8 of memory_limit (more than
// about 500 shards in 64 MiB) is added to the soft limit, as it would leave
// the collector no room at all.
func ManageGoMemoryLimit() {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	goMemoryLimit.managed = os.Getenv("GOMEMLIMIT") == ""
}

// openForGoMemoryLimit counts an input's memory_limit until
// closedForGoMemoryLimit.
func openForGoMemoryLimit(in *memoryPlan) {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	if !goMemoryLimit.managed {
		return
	}
	if goMemoryLimit.inputs == nil {
		goMemoryLimit.inputs = map[*memoryPlan]inputMemory{}
	}
	goMemoryLimit.inputs[in] = inputMemory{limit: in.limit}
	setGoMemoryLimitLocked()
}

// ownForGoMemoryLimit counts own as what in's shards hold, and returns the
// soft limit now set: 0 when the binary does not manage it, an input has
// no limit, or in is closed.
func ownForGoMemoryLimit(in *memoryPlan, own int64) int64 {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	m, ok := goMemoryLimit.inputs[in]
	if !ok {
		return 0
	}
	m.own = own
	goMemoryLimit.inputs[in] = m
	return setGoMemoryLimitLocked()
}

func closedForGoMemoryLimit(in *memoryPlan) {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	if _, ok := goMemoryLimit.inputs[in]; !ok {
		return
	}
	delete(goMemoryLimit.inputs, in)
	setGoMemoryLimitLocked()
}

// setGoMemoryLimitLocked sets the soft limit and returns it: 0 for none.
func setGoMemoryLimitLocked() int64 {
	l := goMemoryLimitFor(goMemoryLimit.inputs)
	debug.SetMemoryLimit(l)
	if l == math.MaxInt64 {
		return 0
	}
	return l
}

// goMemoryLimitFor is the soft limit for inputs of these memory_limits
// and shards: none (math.MaxInt64) without inputs or with one unlimited.
func goMemoryLimitFor(inputs map[*memoryPlan]inputMemory) int64 {
	if len(inputs) == 0 {
		return math.MaxInt64
	}
	var sum int64 = restOfProcess
	for _, m := range inputs {
		if m.limit <= 0 {
			return math.MaxInt64
		}
		sum += m.limit + ownBeyond(m.limit, m.own)
	}
	return sum
}

// ownBeyond is what shards holding own bytes of their own add to the soft
// limit of an input with memory_limit limit: what goes beyond 5/8 of it.
// Up to that, their state comes out of the heap's growth between
// collections (half of the limit, plus the rest of the process's slack);
// beyond, the collector would run without pause and the process would
// pass the limit anyway, slowly.
func ownBeyond(limit, own int64) int64 {
	return max(0, own-limit*5/8)
}

// ownSettle is how long the shard count must stay put before shardsRead
// warns about it: shards join one at a time, and a warning given at the
// first of a thousand would name a memory_limit fit for a few hundred.
const ownSettle = 5 * time.Second

// ownWarnAgain is how long a warning about the shards' own state stays
// said: one given again after the shards were few for a while (an instance
// that lost its leases and took them back) waits this long.
const ownWarnAgain = 10 * time.Minute

// leastRead is the least room a polling read's share of the budget is cut
// to however many shards share it (membudget.SetFloor, at most a quarter
// of the room): about 50 records of 200 bytes. With 512 shards in 8 MiB, a
// share of 32 KiB made reads of a dozen records or two, each a GetRecords
// call.
const leastRead = 64 << 10

// recordsRoom is the room for records in flight of an input whose shards
// hold own bytes of their own. Their state comes first out of the heap's
// growth between collections (half of memory_limit), up to a quarter of
// memory_limit, then out of the records' part (the other half, less the
// fan-out windows' quarter of that), which never goes below an eighth of
// memory_limit, so that many shards still read. Up to about 256 shards in
// 64 MiB the records keep their whole part: by polling, a smaller room
// means smaller reads, each a call. Beyond, a heap grown short of room to
// collect in cost more than the records' room gains (figures in
// cmd/kinesis-bench/BENCHMARKS.md, "Again, with the shards' own state
// counted").
func recordsRoom(limit, windows, own int64) int64 {
	part := limit/2 - windows
	return max(min(part, part+limit/4-own), limit/8)
}

// mibs writes n bytes in MiB, rounded up; below a MiB in KiB, below a KiB
// in bytes, so that a small memory_limit does not read as 0MiB or 1MiB.
func mibs(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", max(n, 0))
	case n < 1<<20:
		return fmt.Sprintf("%dKiB", (n+1<<10-1)>>10)
	}
	return fmt.Sprintf("%dMiB", (n+1<<20-1)>>20)
}
