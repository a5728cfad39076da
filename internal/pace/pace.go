// Package pace spaces calls per key (per shard): a publisher keeps one Pacer
// for all its reads, so that the gap AWS demands between two calls for one
// shard holds also when a read of the shard is restarted.
package pace

import (
	"context"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
)

// Pacer remembers the last call per key. It is safe for concurrent use.
//
// A key whose last call is a gap old no longer matters: such keys are swept
// out as the map grows, so keys of shards that are never read again (gone
// past retention, of a stream created again, resharded away) do not pile up.
type Pacer struct {
	gap time.Duration

	mu      sync.Mutex
	last    map[string]time.Time
	sweepAt int // the size at which the next sweep is due
}

// minSweep is the least size at which stale keys are swept out.
const minSweep = 64

// New returns a Pacer that keeps calls for one key at least gap apart.
func New(gap time.Duration) *Pacer {
	return &Pacer{gap: gap, last: map[string]time.Time{}, sweepAt: minSweep}
}

// Wait waits until a call for key may be made, or ctx ends.
func (p *Pacer) Wait(ctx context.Context, key string) error {
	p.mu.Lock()
	last := p.last[key]
	p.mu.Unlock()
	return backoff.Sleep(ctx, time.Until(last.Add(p.gap)))
}

// Done records that a call for key was made (or answered) now.
func (p *Pacer) Done(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.last[key] = now
	if len(p.last) < p.sweepAt {
		return
	}
	for k, at := range p.last {
		if now.Sub(at) >= p.gap {
			delete(p.last, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.last))
}

// Len returns how many keys are remembered.
func (p *Pacer) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.last)
}

// Forget drops what is remembered of key, e.g. once its shard has ended.
func (p *Pacer) Forget(key string) {
	p.mu.Lock()
	delete(p.last, key)
	p.mu.Unlock()
}
