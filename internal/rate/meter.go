// Package rate measures a smoothed rate of events, such as bytes read from
// a shard, for balancing by load.
package rate

import (
	"math"
	"sync"
	"time"
)

// DefaultWindow is a meter's time constant when its Window is zero: a step
// in the rate shows two thirds of the way after a window, and fully after a
// few.
const DefaultWindow = 30 * time.Second

// Warm is how long a meter runs before its rate is taken as a measure:
// over a shorter time one read weighs too much.
const Warm = 5 * time.Second

// Meter is an exponentially decaying sum of what was added: for a steady
// rate r, the sum divided by Window converges to r, and it decays to zero
// while nothing is added. A young meter's sum is divided by the part of
// the Window it has run (the sum of a steady rate r over age a is
// r·Window·(1-e^(-a/Window))), so that its rate is right from the start, not
// a ramp that would make a shard just taken over look light. Safe for
// concurrent use.
type Meter struct {
	// Window is the time constant (DefaultWindow when zero). Set before
	// the first Add.
	Window time.Duration

	mu    sync.Mutex
	sum   float64 // decayed to last
	last  time.Time
	start time.Time // of the first Add
}

// Add records n units at t.
func (m *Meter) Add(n int, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.start.IsZero() {
		m.start = t
	}
	m.sum = m.decayed(t) + float64(n)
	if t.After(m.last) {
		m.last = t
	}
}

// Seed starts a meter that nothing was added to yet at rate r, as at t:
// as if r had been read steadily for long before (it is warm at once).
// What another meter of the same stream measured until t carries over.
func (m *Meter) Seed(r float64, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.start.IsZero() || r < 0 {
		return
	}
	w := m.window()
	m.start = t.Add(-max(Warm, 5*w))
	m.sum = r * w.Seconds() * (1 - math.Exp(-t.Sub(m.start).Seconds()/w.Seconds()))
	m.last = t
}

// Rate returns the units a second at t, and whether the meter ran Warm.
func (m *Meter) Rate(t time.Time) (rate float64, warm bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.start.IsZero() {
		return 0, false
	}
	age := max(t.Sub(m.start), time.Second)
	w := m.window().Seconds()
	ramp := 1 - math.Exp(-age.Seconds()/w)
	return m.decayed(t) / (w * ramp), age >= Warm
}

func (m *Meter) decayed(t time.Time) float64 {
	if m.last.IsZero() || !t.After(m.last) {
		return m.sum
	}
	return m.sum * math.Exp(-t.Sub(m.last).Seconds()/m.window().Seconds())
}

func (m *Meter) window() time.Duration {
	if m.Window > 0 {
		return m.Window
	}
	return DefaultWindow
}
