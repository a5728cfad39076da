package pace

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestPacerKeepsTheGapPerKey(t *testing.T) {
	ctx := context.Background()

	// With a gap of an hour, a Wait that does not wait returns at once and
	// one that waits does not return for an hour: a Wait bounded by a
	// minute tells them apart on any machine, and a wrong wait fails the
	// test after a minute instead of hanging it.
	p := New(time.Hour)
	withinAMinute := func(key string) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return p.Wait(ctx, key)
	}
	p.Done("a")
	if err := withinAMinute("b"); err != nil {
		t.Fatalf("an unrelated key waited: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := p.Wait(short, "a")
	cancel()
	if err == nil {
		t.Fatal("a key called a moment ago did not wait")
	}
	p.Forget("a")
	if err := withinAMinute("a"); err != nil {
		t.Fatalf("a forgotten key still waited: %v", err)
	}
	p.Done("a")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Wait(cctx, "a"); err == nil {
		t.Fatal("Wait ignored a cancelled context")
	}

	// The wait ends once the gap has passed since Done. start is taken
	// before Done, so a stall between the two cannot shorten what is
	// measured: the wait ends no sooner than gap after start.
	const gap = 50 * time.Millisecond
	p = New(gap)
	start := time.Now()
	p.Done("a")
	if err := p.Wait(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < gap {
		t.Fatalf("waited %v, want at least %v", waited, gap)
	}
}

// TestPacerForgetsStaleKeys: keys of shards that are never read again (gone
// past retention, of a stream created again) must not pile up. Before the
// fix every key stayed for the life of the publisher.
func TestPacerForgetsStaleKeys(t *testing.T) {
	p := New(time.Nanosecond) // every key is stale at once
	for i := range 10_000 {
		p.Done(fmt.Sprint("shard-", i))
	}
	if n := p.Len(); n > 2*minSweep {
		t.Fatalf("%d keys remembered after 10,000 keys were each called once", n)
	}
	q := New(time.Hour) // no key is stale: all are kept
	for i := range 1000 {
		q.Done(fmt.Sprint("shard-", i))
	}
	if n := q.Len(); n != 1000 {
		t.Fatalf("%d keys remembered, want all 1000 within the gap", n)
	}
}
