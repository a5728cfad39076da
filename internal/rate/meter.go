// Package rate measures a smoothed rate of events, such as bytes written to
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

// Meter is the rate at which events arrive at a source that is read with a
// lag, such as the bytes written to a shard: an exponentially decaying sum
// of what was added, on the time axis of the events' arrival, not of their
// reading. For a steady rate r the sum divided by Window converges to r
// however the reads go: a reader that stalls and then catches up, or that
// reads an hour behind, measures the rate the source is written at, not the
// bursts and gaps of its own reads. (Balancing on those moves leases for
// what a pause did, and moves them back once the reader caught up.)
//
// The rate is as of the newest arrival the meter knows of: it decays only
// as reads show that nothing arrived (Add of nothing, up to a time), so a
// reader that stops reading for a while, stalled or held back by its
// consumer, leaves the rate as it was. A young meter's sum is divided by
// the part of the Window it has run (the sum of a steady rate r over age a
// is r·Window·(1-e^(-a/Window))), so that its rate is right from the
// start, not a ramp that would make a shard just taken over look light.
// Safe for concurrent use.
type Meter struct {
	// Window is the time constant (DefaultWindow when zero). Set before
	// the first Add.
	Window time.Duration

	mu     sync.Mutex
	sum    float64   // decayed to last
	last   time.Time // the newest arrival known of (or the seed's time)
	start  time.Time // the first arrival, or the seed's start
	seeded time.Time // arrivals before it are counted by the seed
}

// Add records n units that arrived at the source at arrived: n = 0 tells
// that nothing arrived until then. Arrivals need not come in order.
func (m *Meter) Add(n int, arrived time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if arrived.Before(m.seeded) {
		return // the seeded rate counts it already
	}
	if m.start.IsZero() {
		m.start = arrived
	}
	m.sum = m.decayed(arrived) + float64(n)
	if arrived.After(m.last) {
		m.last = arrived
	}
}

// Seed starts a meter that nothing was added to yet at rate r, as at t:
// as if r had been read steadily for long before (it is warm at once).
// What another meter of the same source measured until t carries over, and
// arrivals before t, which that meter counted, are not added again.
func (m *Meter) Seed(r float64, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.start.IsZero() || r < 0 {
		return
	}
	w := m.window()
	m.start = t.Add(-max(Warm, 5*w))
	m.sum = r * w.Seconds() * (1 - math.Exp(-t.Sub(m.start).Seconds()/w.Seconds()))
	m.last, m.seeded = t, t
}

// Rate returns the units a second as of the newest arrival known of, and
// whether the meter ran Warm by then.
func (m *Meter) Rate() (rate float64, warm bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.start.IsZero() {
		return 0, false
	}
	age := max(m.last.Sub(m.start), time.Second)
	w := m.window().Seconds()
	ramp := 1 - math.Exp(-age.Seconds()/w)
	return m.sum / (w * ramp), age >= Warm
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
