package read

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
)

// TestLockOrder takes every path of the package's lock order at once, from
// many goroutines: shard readers joining and leaving the budget (its
// member-count callback sets its limit and a gauge, as the input's memory
// plan does), taking room, charging it to their ledgers, tracking batches,
// flushing a batch policy's, stopping with batches in flight (exited under
// the tracker's lock); the pipeline acknowledging and rejecting them (the
// tracker, then the ledger, then the budget, then a gauge); a gauge of its
// own lock for the metrics. A cycle in the order would deadlock it (the
// test fails after 30 s); the race detector (make test) checks the rest.
// Every byte of room comes back.
func TestLockOrder(t *testing.T) {
	t.Parallel()
	var gauge struct {
		mu   sync.Mutex
		last int64
	}
	set := func(v int64) {
		gauge.mu.Lock()
		gauge.last = v
		gauge.mu.Unlock()
	}
	budget := membudget.New(1<<20, set)
	var planMu sync.Mutex // the memory plan's own lock
	budget.OnMembers(func(n int) {
		budget.SetLimit(1<<20 - int64(n)<<10)
		planMu.Lock()
		set(int64(n))
		planMu.Unlock()
	})

	const readers, rounds = 8, 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lockOrderReader(t, budget, set, uint64(i), rounds)
			}()
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the readers did not finish in 30 s: a cycle in the lock order deadlocked them")
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("%d bytes of room were not given back", used)
	}
}

// lockOrderReader plays one shard reader for rounds: each round it joins
// the budget, reads, converts and hands out batches that other goroutines
// resolve, and stops with some of them in flight.
func lockOrderReader(t *testing.T, budget *membudget.Budget, set func(int64), seed uint64, rounds int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for range rounds {
		member := budget.Join()
		ledger := &roomLedger{budget: budget}
		tracker := newAckTracker(16)
		tracker.resolved = ledger.resolve
		tracker.report = func(behind, pending int) { set(int64(behind + pending)) }
		var acks sync.WaitGroup
		var inflight []*tracked
		n := 1 + rng.IntN(6)
		for b := range n {
			room, err := member.Take(context.Background(), 100, 400)
			if err != nil {
				t.Error(err)
				return
			}
			records := 1 + rng.IntN(4)
			if rng.IntN(4) == 0 {
				// A batch policy's: the room is given back while the
				// batcher holds the messages, forced when they go out.
				ledger.give(room)
				ledger.flushed(records, room)
			} else {
				ledger.charge(&room, 0, records, records, records)
			}
			e, err := tracker.Track(context.Background(), pos(b+1), records)
			if err != nil {
				t.Error(err)
				return
			}
			if rng.IntN(3) == 0 {
				inflight = append(inflight, e) // when the reader stops
				continue
			}
			acks.Add(1)
			go func(fail bool) {
				defer acks.Done()
				var err error
				if fail {
					err = errors.New("rejected")
				}
				tracker.Ack(e, err)
			}(rng.IntN(5) == 0)
		}
		// The reader stops: the messages never handed out give back their
		// room under the tracker's lock, while acknowledgements go on.
		tracker.withPending(ledger.exited)
		member.Leave()
		acks.Wait()
		// What stayed in flight is resolved after the reader stopped, as
		// the pipeline does.
		for _, e := range inflight {
			tracker.Ack(e, nil)
		}
	}
}
