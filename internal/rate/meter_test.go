package rate

import (
	"math"
	"testing"
	"time"
)

// TestMeterFollowsASteadyRateAndDecays: a steady 1,000 units a second
// read in 5 reads a second reads about 1,000 from the first seconds (not
// warm yet) and converges to it; a rate ten times higher shows within a few
// windows; idle (reads that find nothing), it decays towards zero.
func TestMeterFollowsASteadyRateAndDecays(t *testing.T) {
	var m Meter
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := 200 * time.Millisecond
	feed := func(perSecond int, d time.Duration) {
		for end := at.Add(d); at.Before(end); at = at.Add(step) {
			m.Add(perSecond/5, at)
		}
	}
	rate := func() float64 { r, _ := m.Rate(); return r }
	feed(1000, 2*time.Second)
	if r, warm := m.Rate(); math.Abs(r-1000) > 150 || warm {
		t.Fatalf("2 s at 1000/s reads %.1f warm %v, want about 1000, not warm yet", r, warm)
	}
	feed(1000, 5*DefaultWindow)
	if r, warm := m.Rate(); math.Abs(r-1000) > 30 || !warm {
		t.Fatalf("steady 1000/s reads %.1f warm %v", r, warm)
	}
	feed(10000, 3*DefaultWindow)
	if r := rate(); r < 9000 || r > 10100 {
		t.Fatalf("after three windows at 10000/s: %.1f", r)
	}
	feed(0, 5*DefaultWindow)
	if r := rate(); r > 100 {
		t.Fatalf("after five idle windows: %.1f, want near zero", r)
	}
	var idle Meter
	if r, warm := idle.Rate(); r != 0 || warm {
		t.Fatalf("a meter never added to reads %.1f, warm %v", r, warm)
	}
}

// TestMeterSeededCarriesARate: a meter seeded at a rate reads it at once,
// warm, then follows what is added as if it had measured the rate itself.
func TestMeterSeededCarriesARate(t *testing.T) {
	m := Meter{Window: 6 * time.Second}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.Seed(1000, at)
	if r, warm := m.Rate(); math.Abs(r-1000) > 1 || !warm {
		t.Fatalf("seeded at 1000/s reads %.1f warm %v", r, warm)
	}
	for end := at.Add(30 * time.Second); at.Before(end); at = at.Add(200 * time.Millisecond) {
		m.Add(200, at) // 1000/s
	}
	if r, _ := m.Rate(); math.Abs(r-1000) > 40 {
		t.Fatalf("seeded at 1000/s and fed 1000/s for 30 s reads %.1f", r)
	}
	var fed Meter
	fed.Add(5, at)
	fed.Seed(1000, at) // a meter already measuring is not seeded
	if r, _ := fed.Rate(); r > 10 {
		t.Fatalf("a meter that measured already was seeded: %.1f", r)
	}
}

// TestMeterMeasuresArrivalsNotReads: a source written at 1,000 units a
// second, read live, then by a reader that stalls for 3 s and catches up
// in 300 ms, then by one that reads 20 s behind: the rate stays the
// source's throughout, not the reads' (a meter of reads shows about 0.6
// times it at the end of the stall and 1.4 times it after the catch-up).
// Reads that find nothing decay it; a seeded meter does not count again
// what arrived before its seed.
func TestMeterMeasuresArrivalsNotReads(t *testing.T) {
	m := Meter{Window: 6 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := 100 * time.Millisecond
	written := t0 // arrivals up to here were read
	read := func(to time.Time) {
		for ; written.Before(to); written = written.Add(step) {
			m.Add(100, written)
		}
	}
	check := func(what string) {
		t.Helper()
		if r, _ := m.Rate(); math.Abs(r-1000) > 50 {
			t.Fatalf("%s: %.1f, want about 1000", what, r)
		}
	}
	now := t0
	for ; now.Before(t0.Add(30 * time.Second)); now = now.Add(step) {
		read(now)
	}
	check("read live")
	stalled := now.Add(3 * time.Second)
	for ; now.Before(stalled); now = now.Add(step) {
		check("stalled")
	}
	for ; now.Before(stalled.Add(2 * time.Second)); now = now.Add(step) {
		// Catching up: a second of arrivals per read.
		upto := written.Add(time.Second)
		if upto.After(now) {
			upto = now
		}
		read(upto)
		check("after a 3 s stall, catching up")
	}
	for end := now.Add(30 * time.Second); now.Before(end); now = now.Add(step) {
		read(now.Add(-20 * time.Second))
		check("20 s behind")
	}
	m.Add(0, now.Add(30*time.Second)) // a read finds nothing arrived since
	if r, _ := m.Rate(); r > 50 {
		t.Fatalf("nothing arrived for 30 s: %.1f, want near zero", r)
	}

	seeded := Meter{Window: 6 * time.Second}
	seeded.Seed(1000, t0)
	for a := t0.Add(-2 * time.Second); a.Before(t0.Add(time.Second)); a = a.Add(step) {
		seeded.Add(100, a) // the backlog of a handover, then 1 s live
	}
	if r, _ := seeded.Rate(); math.Abs(r-1000) > 50 {
		t.Fatalf("seeded at 1000/s, then the 2 s before the seed read again: %.1f, want about 1000", r)
	}
}
