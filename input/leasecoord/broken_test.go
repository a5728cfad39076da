package leasecoord

import (
	"errors"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// TestBrokenItemsReportedOncePerChangeAndEveryFewMinutes: a broken item is
// due for a report when first seen, when its error changes, and again once
// brokenRepeat passed; not at every scan in between (a cycle is a third of
// a lease period: the log would fill with one line a second). Before, such
// an item gave only a debug line at every cycle.
func TestBrokenItemsReportedOncePerChangeAndEveryFewMinutes(t *testing.T) {
	t.Parallel()
	b := newBrokenItems()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scan := func(msg string) lease.Scan {
		return lease.Scan{Broken: []lease.BrokenItem{{Key: "k", ShardID: "s0", Err: errors.New(msg)}}}
	}
	steps := []struct {
		at   time.Duration
		msg  string
		want int
	}{
		{0, "counter is S", 1},
		{time.Second, "counter is S", 0},
		{brokenRepeat - time.Second, "counter is S", 0},
		{brokenRepeat, "counter is S", 1},
		{brokenRepeat + time.Second, "counter is N 1.5", 1},
		{brokenRepeat + 2*time.Second, "counter is N 1.5", 0},
	}
	for i, st := range steps {
		if got := len(b.scanned(scan(st.msg), t0.Add(st.at))); got != st.want {
			t.Fatalf("step %d (%v, %q): %d reports due, want %d", i, st.at, st.msg, got, st.want)
		}
		if !b.shard("s0") || b.shards() != 1 {
			t.Fatalf("step %d: s0 not known broken", i)
		}
	}
	// Fixed: forgotten, and reported again if it breaks again.
	if got := b.scanned(lease.Scan{}, t0.Add(brokenRepeat+3*time.Second)); len(got) != 0 || b.shard("s0") {
		t.Fatal("a fixed item is still broken")
	}
	if got := b.scanned(scan("counter is S"), t0.Add(brokenRepeat+4*time.Second)); len(got) != 1 {
		t.Fatal("an item broken again is not reported")
	}
}
