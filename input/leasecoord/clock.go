package leasecoord

import (
	"context"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
)

// Clock is the time a coordinator lives by: every reading of the time,
// every wait and every deadline of a table call goes through it, and so do
// the one lock held across table calls (saveMu) and the table calls made
// side by side. The input runs on the wall clock; the simulation of the
// coordinator (sim_test.go) runs many instances on one virtual clock, from
// a seed, and decides which of them runs when, so that a schedule that
// breaks an invariant replays exactly.
type Clock interface {
	Now() time.Time
	// Sleep waits for d, or until ctx ends (its error then).
	Sleep(ctx context.Context, d time.Duration) error
	// WithTimeout is context.WithTimeout on this clock's time.
	WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
	// NewMutex returns a lock that may be held across table calls.
	NewMutex() sync.Locker
	// Parallel calls do for 0 to n-1 side by side, at most limit at a
	// time, and returns once every call returned.
	Parallel(n, limit int, do func(i int))
}

// wallClock is the Clock of the input: the process's own time.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }

func (wallClock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func (wallClock) NewMutex() sync.Locker { return &sync.Mutex{} }

func (wallClock) Parallel(n, limit int, do func(i int)) {
	if n == 1 {
		do(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			do(i)
		}()
	}
	wg.Wait()
}
