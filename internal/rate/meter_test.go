package rate

import (
	"math"
	"testing"
	"time"
)

// TestMeterFollowsASteadyRateAndDecays: a steady 1,000 units a second
// read in 5 reads a second reads about 1,000 from the first seconds (not
// warm yet) and converges to it; a rate ten times higher shows within a few
// windows; idle, it decays towards zero.
func TestMeterFollowsASteadyRateAndDecays(t *testing.T) {
	var m Meter
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := 200 * time.Millisecond
	feed := func(perSecond int, d time.Duration) {
		for end := at.Add(d); at.Before(end); at = at.Add(step) {
			m.Add(perSecond/5, at)
		}
	}
	rate := func() float64 { r, _ := m.Rate(at); return r }
	feed(1000, 2*time.Second)
	if r, warm := m.Rate(at); math.Abs(r-1000) > 150 || warm {
		t.Fatalf("2 s at 1000/s reads %.1f warm %v, want about 1000, not warm yet", r, warm)
	}
	feed(1000, 5*DefaultWindow)
	if r, warm := m.Rate(at); math.Abs(r-1000) > 30 || !warm {
		t.Fatalf("steady 1000/s reads %.1f warm %v", r, warm)
	}
	feed(10000, 3*DefaultWindow)
	if r := rate(); r < 9000 || r > 10100 {
		t.Fatalf("after three windows at 10000/s: %.1f", r)
	}
	at = at.Add(5 * DefaultWindow)
	if r := rate(); r > 100 {
		t.Fatalf("after five idle windows: %.1f, want near zero", r)
	}
	var idle Meter
	if r, warm := idle.Rate(at); r != 0 || warm {
		t.Fatalf("a meter never added to reads %.1f, warm %v", r, warm)
	}
}

// TestMeterSeededCarriesARate: a meter seeded at a rate reads it at once,
// warm, then follows what is added as if it had measured the rate itself.
func TestMeterSeededCarriesARate(t *testing.T) {
	m := Meter{Window: 6 * time.Second}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.Seed(1000, at)
	if r, warm := m.Rate(at); math.Abs(r-1000) > 1 || !warm {
		t.Fatalf("seeded at 1000/s reads %.1f warm %v", r, warm)
	}
	for end := at.Add(30 * time.Second); at.Before(end); at = at.Add(200 * time.Millisecond) {
		m.Add(200, at) // 1000/s
	}
	if r, _ := m.Rate(at); math.Abs(r-1000) > 40 {
		t.Fatalf("seeded at 1000/s and fed 1000/s for 30 s reads %.1f", r)
	}
	var fed Meter
	fed.Add(5, at)
	fed.Seed(1000, at) // a meter already measuring is not seeded
	if r, _ := fed.Rate(at); r > 10 {
		t.Fatalf("a meter that measured already was seeded: %.1f", r)
	}
}
