package rate

import (
	"math"
	"testing"
	"time"
)

// TestMeterFollowsASteadyRateAndDecays: a steady 1,000 units a second
// read in 5 reads a second converges to 1,000; a rate ten times higher
// shows within a few windows; idle, it decays towards zero.
func TestMeterFollowsASteadyRateAndDecays(t *testing.T) {
	var m Meter
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := 200 * time.Millisecond
	feed := func(perSecond int, d time.Duration) {
		for end := at.Add(d); at.Before(end); at = at.Add(step) {
			m.Add(perSecond/5, at)
		}
	}
	feed(1000, 5*Window)
	if r := m.Rate(at); math.Abs(r-1000) > 30 {
		t.Fatalf("steady 1000/s reads %.1f", r)
	}
	feed(10000, 3*Window)
	if r := m.Rate(at); r < 9000 || r > 10100 {
		t.Fatalf("after three windows at 10000/s: %.1f", r)
	}
	at = at.Add(5 * Window)
	if r := m.Rate(at); r > 100 {
		t.Fatalf("after five idle windows: %.1f, want near zero", r)
	}
	var idle Meter
	if r := idle.Rate(at); r != 0 {
		t.Fatalf("a meter never added to reads %.1f", r)
	}
}
