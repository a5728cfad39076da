package leasecoord

import (
	"context"
	"slices"
	"sync"
	"time"
)

// stepClock is a Clock that stands still until the test moves it on: for
// tests of what the coordinators decide, driven turn by turn from the test,
// where how long a loaded machine (-race, other tests in parallel) takes
// over a turn must not age the leases and beats the turn reads. A reading
// moves it on by a microsecond (see Now), a sleep by its duration (only
// the test's one goroutine sleeps on it), and a deadline set on it
// (WithTimeout) passes when the clock is moved past it.
type stepClock struct {
	mu        sync.Mutex
	t         time.Time
	deadlines []stepDeadline
}

type stepDeadline struct {
	at     time.Time
	cancel context.CancelCauseFunc
}

func newStepClock() *stepClock { return &stepClock{t: time.Unix(1_800_000_000, 0)} }

// Now reads the clock, which moves it on by a microsecond: two readings
// are never equal, as on a real clock, where a table call is answered
// after it was sent and the next one sent after that answer.
func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Microsecond)
	return c.t
}

// advance moves the clock on by d and ends the contexts whose deadline
// that passed.
func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	var passed []context.CancelCauseFunc
	c.deadlines = slices.DeleteFunc(c.deadlines, func(dl stepDeadline) bool {
		if c.t.Before(dl.at) {
			return false
		}
		passed = append(passed, dl.cancel)
		return true
	})
	c.mu.Unlock()
	for _, cancel := range passed {
		cancel(context.DeadlineExceeded)
	}
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.advance(d)
	return nil
}

func (c *stepClock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		cancel(context.DeadlineExceeded)
		return cctx, func() { cancel(context.Canceled) }
	}
	c.mu.Lock()
	c.deadlines = append(c.deadlines, stepDeadline{at: c.t.Add(d), cancel: cancel})
	c.mu.Unlock()
	return cctx, func() { cancel(context.Canceled) }
}

func (c *stepClock) NewMutex() sync.Locker { return &sync.Mutex{} }

func (c *stepClock) Parallel(n, limit int, do func(i int)) { wallClock{}.Parallel(n, limit, do) }
