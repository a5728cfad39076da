// Package rate measures a smoothed rate of events, such as bytes read from
// a shard, for balancing by load.
package rate

import (
	"math"
	"sync"
	"time"
)

// Window is the meter's time constant: a step in the rate shows two thirds
// of the way after Window, and fully after a few. Long enough that a burst
// of one read does not move a lease, short enough that a shard turned hot
// is seen within a minute.
const Window = 30 * time.Second

// Meter is an exponentially decaying sum of what was added, divided by
// Window: for a steady rate r it converges to r, and it decays to zero
// while nothing is added. Safe for concurrent use.
type Meter struct {
	mu   sync.Mutex
	sum  float64 // decayed to last
	last time.Time
}

// Add records n units at t.
func (m *Meter) Add(n int, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sum = m.decayed(t) + float64(n)
	if t.After(m.last) {
		m.last = t
	}
}

// Rate returns the units a second at t.
func (m *Meter) Rate(t time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decayed(t) / Window.Seconds()
}

func (m *Meter) decayed(t time.Time) float64 {
	if m.last.IsZero() || !t.After(m.last) {
		return m.sum
	}
	return m.sum * math.Exp(-t.Sub(m.last).Seconds()/Window.Seconds())
}
