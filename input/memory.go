package input

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
)

// memoryPlan owns the input's memory rules (memory_limit): the budget of the
// records in flight, which every shard reader joins; by fan-out the
// subscriptions' flow-control windows; the Go runtime's soft memory limit
// (gomemlimit.go); the shard count, which moves all of them; and the
// warnings about them. Without a limit it holds nothing.
type memoryPlan struct {
	limit  int64 // memory_limit; 0: none
	reader *readerKind
	log    *service.Logger
	// closing is the input's context: once it ends, a change of the shard
	// count warns of nothing.
	closing context.Context
	metrics *metrics

	// budget bounds the bytes of records in flight across every shard;
	// nil: no limit.
	budget *membudget.Budget
	// windows sizes fan-out's flow-control windows within memory_limit,
	// windowBytes together; nil and 0 without a limit or by polling.
	windows     *awsclient.StreamWindows
	windowBytes int64
	// pulling counts ReadBatch calls waiting for records: the pipeline is
	// asking for more. The budget's valve opens only then: a pipeline that
	// stopped asking (an output down or slow) is not let past the limit.
	pulling atomic.Int32

	stall stallWarning
	own   ownWarning
}

// stallWarning is when budgetStalled last warned.
type stallWarning struct {
	mu     sync.Mutex
	warned time.Time
}

// ownWarning is the shard count shardsRead was told last, the timer of its
// warnings (warnOwn), and whether and when they were given: that the
// shards' own state takes more than half of memory_limit, and that it
// raised the soft memory limit.
type ownWarning struct {
	mu                 sync.Mutex
	shards             int
	soft               int64 // the soft limit with them; 0: none
	timer              *time.Timer
	warned, raised     bool
	warnedAt, raisedAt time.Time
}

// newMemoryPlan sets up the memory rules of an input's configuration; ctx
// is the input's.
func newMemoryPlan(ctx context.Context, conf config, log *service.Logger, m *metrics) *memoryPlan {
	p := &memoryPlan{limit: conf.MemoryLimit, reader: conf.Reader, log: log, closing: ctx, metrics: m}
	if p.limit > 0 {
		// Half of the limit bounds the records in flight, the other half
		// is what the heap grows by between collections. By fan-out, a
		// quarter of the records' half is for what subscriptions buffer
		// unread in the transport.
		records := p.limit / 2
		if div := p.reader.windowsDiv; div > 0 {
			p.windowBytes = records / div
			p.windows = awsclient.NewStreamWindows(p.windowBytes, conf.TLS)
			records -= p.windowBytes
		}
		p.budget = membudget.New(records, func(used int64) { m.bytesInFlight.Set(used) })
		p.budget.OnStall(budgetStall, func() bool { return p.pulling.Load() > 0 }, p.budgetStalled)
		if p.reader.floor > 0 {
			p.budget.SetFloor(p.reader.floor)
		}
		m.bytesInFlightLimit.Set(records)
	}
	openForGoMemoryLimit(p)
	if p.budget != nil {
		p.budget.OnMembers(p.shardsRead) // after open: it counts the shards there
	}
	return p
}

// close ends the plan's part in the soft memory limit, and its warnings.
func (p *memoryPlan) close() {
	p.stopWarningOwn()
	closedForGoMemoryLimit(p)
}

// efoWindows is windows as the fan-out publisher takes them: nil without.
func (p *memoryPlan) efoWindows() efo.Windows {
	if p.windows == nil {
		return nil
	}
	return p.windows
}

// budgetStall is how long shards wait for room with none coming back before
// one read goes over memory_limit (membudget.Budget.OnStall).
var budgetStall = 10 * time.Second

// budgetStalled warns, at most once a minute, that a read went over
// memory_limit because no room came back.
func (p *memoryPlan) budgetStalled(granted int64) {
	p.stall.mu.Lock()
	defer p.stall.mu.Unlock()
	if time.Since(p.stall.warned) < time.Minute {
		return
	}
	p.stall.warned = time.Now()
	p.log.Warnf("memory_limit: shards waited %v for room, none came back, and the pipeline waits for records: a read of %d bytes goes over the limit, and another every %v while this lasts. The pipeline holds more records unacknowledged than memory_limit allows them (%d bytes): an output or a processor batching by count or byte_size waits for records that cannot be read until it lets go of some. Raise memory_limit, or lower that batch", budgetStall, granted, budgetStall, p.budget.Limit())
}

// shardsRead is told by the budget how many shards the input reads: their
// own state comes out of the room for records (recordsRoom) and, beyond
// 5/8 of memory_limit, goes on the soft limit, both at once; warnOwn
// warns about it once the count stayed put for ownSettle.
func (p *memoryPlan) shardsRead(n int) {
	own := int64(n) * p.reader.shardOwn
	room := recordsRoom(p.limit, p.windowBytes, own)
	p.budget.SetLimit(room)
	p.metrics.bytesInFlightLimit.Set(room)
	p.own.mu.Lock()
	defer p.own.mu.Unlock()
	// Under own.mu, so that warnOwn reads the soft limit of the count it
	// reads.
	p.own.soft = ownForGoMemoryLimit(p, own)
	p.own.shards = n
	if p.closing.Err() != nil {
		return // closing: its shards leave, nothing to warn about
	}
	if p.own.timer == nil {
		p.own.timer = time.AfterFunc(ownSettle, p.warnOwn)
		return
	}
	p.own.timer.Reset(ownSettle)
}

// stopWarningOwn stops a warnOwn to come; the input is closing.
func (p *memoryPlan) stopWarningOwn() {
	p.own.mu.Lock()
	defer p.own.mu.Unlock()
	if p.own.timer != nil {
		p.own.timer.Stop()
	}
}

// warnOwn warns, when the binary sets the soft memory limit, that the
// shards' own state takes more than half of memory_limit, and that it
// raised the soft limit: each once, and again only after the shards took
// a quarter or less and ownWarnAgain went by.
func (p *memoryPlan) warnOwn() {
	limit := p.limit
	p.own.mu.Lock()
	defer p.own.mu.Unlock()
	n, soft := p.own.shards, p.own.soft
	own := int64(n) * p.reader.shardOwn
	if soft == 0 {
		return // GOMEMLIMIT rules, or the input closed
	}
	if own <= limit/4 {
		p.own.warned, p.own.raised = false, false
		return
	}
	if own > limit/2 && !p.own.warned && time.Since(p.own.warnedAt) >= ownWarnAgain {
		p.own.warned, p.own.warnedAt = true, time.Now()
		p.log.Warnf("memory_limit: this input reads %d shards by %s, whose own state (goroutines, connections, buffers: about %d KiB a shard) takes about %s, more than half of memory_limit (%s): the records in flight get only %s of it (kinesis_bytes_in_flight_limit), in smaller reads, and the Go heap little room to grow between collections, so reading slows. A memory_limit of %s or more gives them room; or read fewer shards in each instance (a lease table shares them).",
			n, p.reader.name, p.reader.shardOwn>>10, mibs(own), mibs(limit), mibs(recordsRoom(limit, p.windowBytes, own)), mibs(2*own))
	}
	if beyond := ownBeyond(limit, own); beyond > 0 && !p.own.raised && time.Since(p.own.raisedAt) >= ownWarnAgain {
		p.own.raised, p.own.raisedAt = true, time.Now()
		p.log.Warnf("memory_limit: the own state of %d shards (about %s) goes beyond the 5/8 of memory_limit (%s) it may take: the Go soft memory limit is raised by %s to %s, so that the heap is not collected without pause, and the process holds that much more than memory_limit + 55 MiB. Set memory_limit to %s or more to keep within it.",
			n, mibs(own), mibs(limit), mibs(beyond), mibs(soft), mibs(2*own))
	}
}
