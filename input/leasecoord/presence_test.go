package leasecoord

import (
	"math"
	"slices"
	"testing"
	"time"
)

// publishLoads runs loadsMoved once a cycle (a third of the lease period)
// from a common start for d, over loads at(t), publishing as beat does
// when it answers true; it returns the times of the writings after the
// first.
func publishLoads(c *leaseCoordinator, d time.Duration, at func(time.Duration) map[string]float64, each func(time.Duration)) []time.Duration {
	start := time.Unix(1_700_000_000, 0)
	listed := []string{"a", "b"}
	c.pres.published, c.pres.held = at(0), slices.Clone(listed)
	var wrote []time.Duration
	for t := c.period / 3; t <= d; t += c.period / 3 {
		loads := at(t)
		if c.loadsMoved(listed, loads, start.Add(t)) {
			c.pres.published = loads
			wrote = append(wrote, t)
		}
		if each != nil {
			each(t)
		}
	}
	return wrote
}

// TestLoadsPublishedAlongARamp: a shard turned ten times hotter ramps its
// meter up over a few cycles (time constant loadWindow lease periods); the
// balance moves the holder's other shard once the hot one weighs more than
// about twice the others, so what is published follows the ramp: at least
// 2.5 times the old rate within one lease period of the step. (Writings
// at most every two lease periods published 1.95 times at the first cycle,
// then nothing until the fifth: the hot shard's holder kept its other
// shard 6.6 s after the step at lease_period 2s, in the binary's test.)
func TestLoadsPublishedAlongARamp(t *testing.T) {
	t.Parallel()
	c := &leaseCoordinator{period: 2 * time.Second}
	const base = 5120.0
	window := loadWindow * c.period
	ramp := func(t time.Duration) map[string]float64 {
		return map[string]float64{"a": base * (1 + 9*(1-math.Exp(-t.Seconds()/window.Seconds()))), "b": base}
	}
	// Settled for long before the step: every token back.
	publishLoads(c, 10*c.period, func(time.Duration) map[string]float64 { return ramp(0) }, nil)
	var within float64
	wrote := publishLoads(c, 4*c.period, ramp, func(t time.Duration) {
		if t <= c.period {
			within = c.pres.published["a"]
		}
	})
	if within < 2.5*base {
		t.Errorf("one lease period after the step the hot shard's load was published as %.2f times its old rate, want at least 2.5 (writings at %v)", within/base, wrote)
	}
}

// TestWanderingLoadsPublishedEveryTwoPeriods: a shard whose rate doubles
// and halves every cycle for ten minutes costs a writing of the worker
// item every publishEvery lease periods, after a first burst.
func TestWanderingLoadsPublishedEveryTwoPeriods(t *testing.T) {
	t.Parallel()
	c := &leaseCoordinator{period: 10 * time.Second}
	const d = 10 * time.Minute
	wrote := publishLoads(c, d, func(t time.Duration) map[string]float64 {
		if (t/(c.period/3))%2 == 0 {
			return map[string]float64{"a": 5120, "b": 5120}
		}
		return map[string]float64{"a": 10240, "b": 5120}
	}, nil)
	most := publishBurst + int(d/(publishEvery*c.period))
	if len(wrote) > most || len(wrote) < most-1 {
		t.Errorf("%d writings in %v of loads wandering every cycle, want %d (a burst of %d, then one every %d lease periods)", len(wrote), d, most, publishBurst, publishEvery)
	}
}
