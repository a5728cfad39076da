package input

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// restOfProcess is what a binary running inputs holds besides their
// records, for the Go runtime's soft memory limit: its heap at rest (about
// 15 MiB with Benthos' components and the SDK loaded) and the stacks of a
// few hundred shards' goroutines.
const restOfProcess = 24 << 20

// goMemoryLimit sets the Go runtime's soft memory limit from the inputs'
// memory_limit, once a binary has asked for it (ManageGoMemoryLimit).
var goMemoryLimit struct {
	mu      sync.Mutex
	managed bool
	inputs  map[*kinesisInput]int64 // memory_limit of each input open; 0: none
}

// ManageGoMemoryLimit lets the inputs of this process set the Go runtime's
// soft memory limit (runtime/debug.SetMemoryLimit) to the sum of their
// memory_limit plus 24 MiB for the rest of the process, unless GOMEMLIMIT
// is set or an input has no limit. A binary that runs nothing but pipelines
// calls it once before it starts them. Half of memory_limit bounds the
// records in flight; the other half is what the heap grows by between
// collections: without a soft limit the Go heap grows to twice what is
// live, the whole process's, before it is collected.
func ManageGoMemoryLimit() {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	goMemoryLimit.managed = os.Getenv("GOMEMLIMIT") == ""
}

// openForGoMemoryLimit counts in's memory_limit until closedForGoMemoryLimit.
func openForGoMemoryLimit(in *kinesisInput, limit int64) {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	if !goMemoryLimit.managed {
		return
	}
	if goMemoryLimit.inputs == nil {
		goMemoryLimit.inputs = map[*kinesisInput]int64{}
	}
	goMemoryLimit.inputs[in] = limit
	setGoMemoryLimitLocked()
}

func closedForGoMemoryLimit(in *kinesisInput) {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	if _, ok := goMemoryLimit.inputs[in]; !ok {
		return
	}
	delete(goMemoryLimit.inputs, in)
	setGoMemoryLimitLocked()
}

func setGoMemoryLimitLocked() {
	debug.SetMemoryLimit(goMemoryLimitFor(goMemoryLimit.inputs))
}

// goMemoryLimitFor is the soft limit for inputs of these memory_limits:
// none (math.MaxInt64) without inputs or with one unlimited.
func goMemoryLimitFor(limits map[*kinesisInput]int64) int64 {
	if len(limits) == 0 {
		return math.MaxInt64
	}
	var sum int64 = restOfProcess
	for _, l := range limits {
		if l <= 0 {
			return math.MaxInt64
		}
		sum += l
	}
	return sum
}
