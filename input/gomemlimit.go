package input

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// restOfProcess is what a binary running inputs holds besides their
// records and shards, for the Go runtime's soft memory limit: its heap at
// rest (about 15 MiB with Benthos' components and the SDK loaded), and some
// room beyond.
const restOfProcess = 24 << 20

// What one shard being read holds besides its records: its goroutines'
// stacks, its reader's, publisher's and metrics' state, and by fan-out its
// subscription's HTTP/2 stream and the SDK's event stream reader (three
// goroutines more). Measured as the resident memory of the binary idle at
// 512 and 1,024 shards over its memory at 4 (kinesis-bench -idle): 58 to
// 75 KiB a shard by polling, 61 to 82 KiB by fan-out.
const (
	shardOwnPolling = 64 << 10
	shardOwnEFO     = 80 << 10
)

// shardOwn is what one shard read by reader holds besides its records.
func shardOwn(reader string) int64 {
	if reader == readerEFO {
		return shardOwnEFO
	}
	return shardOwnPolling
}

// goMemoryLimit sets the Go runtime's soft memory limit from the inputs'
// memory_limit and shards, once a binary has asked for it
// (ManageGoMemoryLimit).
var goMemoryLimit struct {
	mu      sync.Mutex
	managed bool
	inputs  map[*kinesisInput]inputMemory
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

// openForGoMemoryLimit counts in's memory_limit until closedForGoMemoryLimit.
func openForGoMemoryLimit(in *kinesisInput, limit int64) {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	if !goMemoryLimit.managed {
		return
	}
	if goMemoryLimit.inputs == nil {
		goMemoryLimit.inputs = map[*kinesisInput]inputMemory{}
	}
	goMemoryLimit.inputs[in] = inputMemory{limit: limit}
	setGoMemoryLimitLocked()
}

// ownForGoMemoryLimit counts own as what in's shards hold, and returns the
// soft limit now set: 0 when the binary does not manage it or in is closed.
func ownForGoMemoryLimit(in *kinesisInput, own int64) int64 {
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

func closedForGoMemoryLimit(in *kinesisInput) {
	goMemoryLimit.mu.Lock()
	defer goMemoryLimit.mu.Unlock()
	if _, ok := goMemoryLimit.inputs[in]; !ok {
		return
	}
	delete(goMemoryLimit.inputs, in)
	setGoMemoryLimitLocked()
}

func setGoMemoryLimitLocked() int64 {
	l := goMemoryLimitFor(goMemoryLimit.inputs)
	debug.SetMemoryLimit(l)
	return l
}

// goMemoryLimitFor is the soft limit for inputs of these memory_limits
// and shards: none (math.MaxInt64) without inputs or with one unlimited.
func goMemoryLimitFor(inputs map[*kinesisInput]inputMemory) int64 {
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

// shardsRead is told by the budget how many shards the input reads: it
// counts their own state in the soft limit, and warns once their state
// takes more than half of memory_limit, and again if it raises the soft
// limit (once each until it falls back under a quarter).
func (in *kinesisInput) shardsRead(n int) {
	limit := in.conf.MemoryLimit
	own := int64(n) * shardOwn(in.conf.Reader)
	soft := ownForGoMemoryLimit(in, own)
	in.ownMu.Lock()
	defer in.ownMu.Unlock()
	switch {
	case own <= limit/4:
		in.ownWarned, in.ownRaised = false, false
	case own > limit/2 && !in.ownWarned:
		in.ownWarned = true
		in.log.Warnf("memory_limit: this input reads %d shards by %s, whose own state (goroutines, connections, buffers: about %d KiB a shard) takes about %s, more than half of memory_limit (%s): it leaves the Go heap little room to grow between collections, which then run often and slow reading down. A memory_limit of %s or more gives it room; or read fewer shards in each instance (a lease table shares them).",
			n, in.conf.Reader, shardOwn(in.conf.Reader)>>10, mibs(own), mibs(limit), mibs(2*own))
	}
	if beyond := ownBeyond(limit, own); beyond > 0 && soft > 0 && !in.ownRaised {
		in.ownRaised = true
		in.log.Warnf("memory_limit: the own state of %d shards (about %s) goes beyond what memory_limit (%s) leaves it: the Go soft memory limit is raised by %s to %s, so the process will hold more than memory_limit plus the rest; set memory_limit to %s or more to keep within it",
			n, mibs(own), mibs(limit), mibs(beyond), mibs(soft), mibs(2*own))
	}
}

// mibs writes n bytes in MiB, rounded up.
func mibs(n int64) string {
	return fmt.Sprintf("%dMiB", (n+(1<<20)-1)>>20)
}
