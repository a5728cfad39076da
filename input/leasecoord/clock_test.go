package leasecoord

import (
	"context"
	"sync"
	"time"
)

// stepClock is a Clock that stands still until the test moves it on: for
// tests of what the coordinators decide, driven turn by turn from the test,
// where how long a loaded machine (-race, other tests in parallel) takes
// over a turn must not age the leases and beats the turn reads. A sleep
// moves it on by its duration (only the test's one goroutine sleeps on it);
// table calls get no deadline of their own (lease.Memory answers at once).
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func newStepClock() *stepClock { return &stepClock{t: time.Unix(1_800_000_000, 0)} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.advance(d)
	return nil
}

func (c *stepClock) WithTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

func (c *stepClock) NewMutex() sync.Locker { return &sync.Mutex{} }

func (c *stepClock) Parallel(n, limit int, do func(i int)) { wallClock{}.Parallel(n, limit, do) }
