package leasecoord

// The runtime of the simulation (sim_test.go): a virtual clock and a
// scheduler that runs one goroutine at a time. Every wait of the code
// under test goes through simClock (a Clock), so which goroutine runs, and
// when, follows from the seed alone: a failing schedule replays exactly.

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// simWorld is the virtual time of one schedule and the queue of what
// happens next. Events at one time run in the order of their keys (an
// instance's name, a shard's), then of their scheduling: an order that
// does not depend on the order of map iterations in the code under test.
type simWorld struct {
	now   time.Time
	queue simQueue
	seq   uint64
	rng   *rand.Rand
	// yield receives when the running task parks or returns: the
	// scheduler then goes on.
	yield chan struct{}
	// over is set once the schedule ended: waits and table calls return
	// errSimDown at once, so that every task unwinds.
	over  bool
	steps int
	// instant counts the steps at the current time.
	instant int
	// trace, when tracing, holds each step run and each event scheduled,
	// with where: two runs of a seed that part tell where (firstParting).
	tracing bool
	trace   []string
}

var errSimDown = errors.New("sim: the process is down")

type simEvent struct {
	at  time.Time
	key string
	seq uint64
	run func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].key != q[j].key {
		return q[i].key < q[j].key
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func newSimWorld(seed uint64) *simWorld {
	return &simWorld{
		now:   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		yield: make(chan struct{}),
	}
}

// at schedules run at t (now, if t passed).
func (w *simWorld) at(t time.Time, key string, run func()) {
	if t.Before(w.now) {
		t = w.now
	}
	w.seq++
	if w.tracing {
		w.trace = append(w.trace, fmt.Sprintf("  schedules %d at %v, key %q, from %s", w.seq, t.Sub(simEpoch), key, simCaller()))
	}
	heap.Push(&w.queue, &simEvent{at: t, key: key, seq: w.seq, run: run})
}

// runUntil runs events until end (or the queue empties), calling check
// after each; it stops at the first error check returns.
func (w *simWorld) runUntil(end time.Time, check func() error) error {
	for w.queue.Len() > 0 {
		e := w.queue[0]
		if e.at.After(end) {
			break
		}
		heap.Pop(&w.queue)
		if e.at.Equal(w.now) {
			if w.instant++; w.instant > 100_000 {
				return fmt.Errorf("at %v: over 100,000 steps without time passing (a loop that waits for nothing)", w.now.Sub(simEpoch))
			}
		} else {
			w.instant = 0
		}
		w.now = e.at
		w.steps++
		if w.tracing {
			w.trace = append(w.trace, fmt.Sprintf("step %d: event %d at %v, key %q", w.steps, e.seq, e.at.Sub(simEpoch), e.key))
		}
		e.run()
		if err := check(); err != nil {
			return err
		}
	}
	if w.now.Before(end) {
		w.now = end
	}
	return nil
}

// simCaller names the first caller outside the world's runtime.
func simCaller() string {
	for skip := 2; ; skip++ {
		_, file, line, ok := runtime.Caller(skip)
		if !ok {
			return "?"
		}
		if !strings.HasSuffix(file, "/sim_world_test.go") {
			return fmt.Sprintf("%s:%d", filepath.Base(file), line)
		}
	}
}

// firstParting shows where two traces of one seed part, with what led
// there.
func firstParting(a, b []string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-8)
	return fmt.Sprintf("the traces part at line %d:\n%s\n--- one run went on:\n%s\n--- the other:\n%s",
		i, strings.Join(a[from:i], "\n"), strings.Join(a[i:min(len(a), i+4)], "\n"), strings.Join(b[i:min(len(b), i+4)], "\n"))
}

// drain ends the schedule: every parked task is woken in turn and unwinds
// (its waits and table calls fail at once), and nothing new starts.
func (w *simWorld) drain() {
	w.over = true
	for w.queue.Len() > 0 {
		e := heap.Pop(&w.queue).(*simEvent)
		if e.at.After(w.now) {
			w.now = e.at
		}
		e.run()
	}
}

// task runs f as a task on a goroutine of its own, now, until it parks or
// returns; the scheduler waits meanwhile. Called on the scheduler.
func (w *simWorld) task(f func()) {
	go func() {
		defer func() { w.yield <- struct{}{} }()
		f()
	}()
	<-w.yield
}

// spawn schedules f to run as a task at t, for the process p (nil: the
// world), deferred while p is paused.
func (w *simWorld) spawn(p *simProc, t time.Time, key string, f func()) {
	var start func()
	start = func() {
		if p != nil && p.pausedAt(w.now) {
			w.at(p.pausedUntil, key, start)
			return
		}
		w.task(f)
	}
	w.at(t, key, start)
}

// park blocks the calling task until t, later while p is paused (a
// stopped process sees nothing until it runs again).
func (w *simWorld) park(p *simProc, t time.Time) {
	wake := make(chan struct{})
	w.wakeAt(p, t, wake)
	w.yield <- struct{}{}
	<-wake
}

// wakeAt resumes the task parked on wake at t (later while p is paused),
// and waits until it parks again or returns.
func (w *simWorld) wakeAt(p *simProc, t time.Time, wake chan struct{}) {
	var resume func()
	resume = func() {
		if p != nil && !w.over && p.pausedAt(w.now) {
			w.at(p.pausedUntil, p.key, resume)
			return
		}
		wake <- struct{}{}
		<-w.yield
	}
	key := ""
	if p != nil {
		key = p.key
	}
	w.at(t, key, resume)
}

// simClock is the Clock of one simulated process.
type simClock struct {
	w *simWorld
	p *simProc
}

func (c simClock) Now() time.Time { return c.w.now }

func (c simClock) down() bool { return c.w.over || c.p.crashed }

func (c simClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.down() {
		return errSimDown
	}
	until := c.w.now.Add(d)
	dl, has := simDeadline(ctx)
	if has && dl.Before(until) {
		until = dl
	}
	c.w.park(c.p, until)
	if c.down() {
		return errSimDown
	}
	return ctx.Err()
}

func (c simClock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	dl := c.w.now.Add(d)
	if p, ok := simDeadline(ctx); ok && p.Before(dl) {
		dl = p
	}
	cctx, cancel := context.WithCancel(ctx)
	return &simCtx{Context: cctx, deadline: dl, w: c.w}, cancel
}

func (c simClock) NewMutex() sync.Locker { return &simMutex{w: c.w, p: c.p} }

// Parallel runs each call as a task of its own, started now in order, and
// parks until the last returns.
func (c simClock) Parallel(n, _ int, do func(i int)) {
	left := n
	wake := make(chan struct{})
	for i := range n {
		c.w.spawn(c.p, c.w.now, c.p.key, func() {
			do(i)
			if left--; left == 0 {
				c.w.wakeAt(c.p, c.w.now, wake)
			}
		})
	}
	c.w.yield <- struct{}{}
	<-wake
}

// simCtx is a context whose deadline is on the virtual clock.
type simCtx struct {
	context.Context
	deadline time.Time
	w        *simWorld
}

type simDeadlineKey struct{}

func (s *simCtx) Deadline() (time.Time, bool) { return s.deadline, true }

func (s *simCtx) Err() error {
	if err := s.Context.Err(); err != nil {
		return err
	}
	if !s.w.now.Before(s.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (s *simCtx) Value(key any) any {
	if key == (simDeadlineKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// simDeadline returns the virtual deadline of ctx, if it has one.
func simDeadline(ctx context.Context) (time.Time, bool) {
	if s, ok := ctx.Value(simDeadlineKey{}).(*simCtx); ok {
		return s.deadline, true
	}
	return time.Time{}, false
}

// simMutex is a mutex whose waiters park on the scheduler: the next one
// gets it when it is unlocked, in the order they came.
type simMutex struct {
	w       *simWorld
	p       *simProc
	held    bool
	waiters []chan struct{}
}

func (m *simMutex) Lock() {
	if !m.held {
		m.held = true
		return
	}
	wake := make(chan struct{})
	m.waiters = append(m.waiters, wake)
	m.w.yield <- struct{}{}
	<-wake
}

func (m *simMutex) Unlock() {
	if len(m.waiters) == 0 {
		m.held = false
		return
	}
	wake := m.waiters[0]
	m.waiters = m.waiters[1:]
	m.w.wakeAt(m.p, m.w.now, wake) // it holds the lock from here
}
