// Package backoff is a full-jitter exponential backoff for retry loops. Each
// loop owns one Backoff; it is not safe for concurrent use.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields waits drawn uniformly from [0, min(Max, Initial*2^n)) for the
// n-th consecutive failure (full jitter), so that many workers failing at once
// spread their retries instead of retrying in step. Reset after a success.
type Backoff struct {
	// Initial is the ceiling of the first wait. Zero means 100ms.
	Initial time.Duration
	// Max caps the ceiling. Zero means 10s.
	Max time.Duration
	// Floor is added to every wait; zero means none. Use it where a service
	// demands a minimum gap between calls.
	Floor time.Duration

	attempt int
}

// Next returns the wait before the next retry and counts one more failure.
func (b *Backoff) Next() time.Duration {
	initial, max := b.Initial, b.Max
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if max <= 0 {
		max = 10 * time.Second
	}
	ceiling := max
	if b.attempt < 62 {
		if c := initial << b.attempt; c > 0 && c < max {
			ceiling = c
		}
	}
	b.attempt++
	return b.Floor + rand.N(ceiling+1)
}

// Attempts is the number of failures since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset forgets past failures.
func (b *Backoff) Reset() { b.attempt = 0 }

// Wait sleeps for Next() or until ctx ends, whichever comes first, and returns
// ctx.Err() in the latter case.
func (b *Backoff) Wait(ctx context.Context) error {
	return Sleep(ctx, b.Next())
}

// Sleep waits for d or until ctx ends; it returns ctx.Err() if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
