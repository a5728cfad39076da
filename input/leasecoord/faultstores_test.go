package leasecoord

// Lease tables that misbehave as DynamoDB does under production timings:
// calls held in flight, delayed, failing, or applied with their answer
// lost. Each wraps a lease.Store (lease.Memory in the tests).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// gate holds the next call it is armed for in flight until released (as
// a throttled request that the SDK retries, or one slow on the network, is
// applied late).
type gate struct {
	mu      sync.Mutex
	hold    chan struct{} // non-nil: the next call waits for it to close
	entered chan struct{} // closed once that call is in flight
}

// holdNext arms the gate: entered closes once the next call is in flight,
// and it goes on once release is closed.
func (g *gate) holdNext() (entered, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.entered = make(chan struct{}), make(chan struct{})
	return g.entered, g.hold
}

// pass lets a call through, holding it first when the gate is armed.
func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	hold, entered := g.hold, g.entered
	g.hold, g.entered = nil, nil
	g.mu.Unlock()
	if hold == nil {
		return nil
	}
	close(entered)
	select {
	case <-hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// slowHeartbeats is a lease table whose heartbeats can be held in flight,
// applied only once released, always within the caller's deadline.
type slowHeartbeats struct {
	lease.Store
	gate
}

func (s *slowHeartbeats) Beat(ctx context.Context, streamARN, me string, b lease.Beat, takeOver bool) (lease.Beat, error) {
	if err := s.pass(ctx); err != nil {
		return b, err
	}
	return s.Store.Beat(ctx, streamARN, me, b, takeOver)
}

// jitteryBeats delays heartbeats by delay: DynamoDB's latency, which
// varies by tens of milliseconds from one call to the next.
type jitteryBeats struct {
	lease.Store
	delay atomic.Int64
}

func (j *jitteryBeats) Beat(ctx context.Context, streamARN, me string, b lease.Beat, takeOver bool) (lease.Beat, error) {
	time.Sleep(time.Duration(j.delay.Load()))
	return j.Store.Beat(ctx, streamARN, me, b, takeOver)
}

// failingScans is a lease table whose reads for a cycle (the poll, the
// scan) fail, throttled, while single-item reads and writes succeed.
type failingScans struct {
	lease.Store
	fail atomic.Bool
}

func (f *failingScans) Poll(ctx context.Context, streamARN string) (lease.Poll, error) {
	if f.fail.Load() {
		return lease.Poll{}, errScanThrottled
	}
	return f.Store.Poll(ctx, streamARN)
}

func (f *failingScans) Scan(ctx context.Context, streamARN string) (lease.Scan, error) {
	if f.fail.Load() {
		return lease.Scan{}, errScanThrottled
	}
	return f.Store.Scan(ctx, streamARN)
}

var errScanThrottled = fmt.Errorf("injected: scan throttled (ProvisionedThroughputExceededException)")

// lostAnswers is a lease table whose next Hold is applied and its answer
// lost (a time-out after the write landed).
type lostAnswers struct {
	lease.Store
	loseNext atomic.Bool
}

func (l *lostAnswers) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w lease.Write) (lease.Shard, error) {
	s, err := l.Store.Hold(ctx, streamARN, shardID, me, counter, w)
	if err == nil && l.loseNext.Swap(false) {
		return lease.Shard{}, context.DeadlineExceeded
	}
	return s, err
}

// lostStreamWrites is a lease table whose writes of the stream's item are
// applied and their answers lost while lose is set.
type lostStreamWrites struct {
	lease.Store
	lose atomic.Bool
}

func (l *lostStreamWrites) ReplaceStream(ctx context.Context, s lease.Stream) error {
	if err := l.Store.ReplaceStream(ctx, s); err != nil || !l.lose.Load() {
		return err
	}
	return context.DeadlineExceeded
}

// heldHolds is a lease table whose next Hold can be held in flight until
// released (then it applies).
type heldHolds struct {
	lease.Store
	gate
}

func (h *heldHolds) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w lease.Write) (lease.Shard, error) {
	if err := h.pass(context.WithoutCancel(ctx)); err != nil {
		return lease.Shard{}, err
	}
	return h.Store.Hold(ctx, streamARN, shardID, me, counter, w)
}

// flakyStore makes writes fail at random: before they apply, or after
// (the answer lost), as a table behind a bad network does.
type flakyStore struct {
	lease.Store
	mu   sync.Mutex
	rng  *rand.Rand
	rate float64
}

var errInjected = errors.New("injected: connection reset")

// roll returns 0 (no fault), 1 (fail before) or 2 (fail after applying).
func (f *flakyStore) roll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rate == 0 || f.rng.Float64() >= f.rate {
		return 0
	}
	return 1 + f.rng.IntN(2)
}

func (f *flakyStore) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w lease.Write) (lease.Shard, error) {
	r := f.roll()
	if r == 1 {
		return lease.Shard{}, errInjected
	}
	s, err := f.Store.Hold(ctx, streamARN, shardID, me, counter, w)
	if r == 2 && err == nil {
		return lease.Shard{}, errInjected
	}
	return s, err
}

func (f *flakyStore) Take(ctx context.Context, s lease.Shard, me, nonce string) (lease.Shard, error) {
	r := f.roll()
	if r == 1 {
		return lease.Shard{}, errInjected
	}
	got, err := f.Store.Take(ctx, s, me, nonce)
	if r == 2 && err == nil {
		return lease.Shard{}, errInjected
	}
	return got, err
}

func (f *flakyStore) Ask(ctx context.Context, s lease.Shard, me, nonce string) error {
	r := f.roll()
	if r == 1 {
		return errInjected
	}
	err := f.Store.Ask(ctx, s, me, nonce)
	if r == 2 && err == nil {
		return errInjected
	}
	return err
}

// staleScans is a lease table whose scans, once frozen, answer with the
// scan made then (an eventually consistent scan behind the writes), and
// whose Takes lose their answer when loseTakes is set.
type staleScans struct {
	lease.Store
	mu        sync.Mutex
	frozen    *lease.Scan
	loseTakes atomic.Bool
}

func (s *staleScans) freeze(ctx context.Context, streamARN string) error {
	sc, err := s.Store.Scan(ctx, streamARN)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = &sc
	return err
}

func (s *staleScans) Scan(ctx context.Context, streamARN string) (lease.Scan, error) {
	s.mu.Lock()
	frozen := s.frozen
	s.mu.Unlock()
	if frozen != nil {
		return *frozen, nil
	}
	return s.Store.Scan(ctx, streamARN)
}

func (s *staleScans) ScanConsistent(ctx context.Context, streamARN string) (lease.Scan, error) {
	return s.Scan(ctx, streamARN)
}

func (s *staleScans) Take(ctx context.Context, it lease.Shard, me, nonce string) (lease.Shard, error) {
	got, err := s.Store.Take(ctx, it, me, nonce)
	if s.loseTakes.Load() {
		return lease.Shard{}, context.DeadlineExceeded
	}
	return got, err
}
