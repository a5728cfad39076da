package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextStaysWithinCeiling(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond, Floor: time.Millisecond}
	ceilings := []time.Duration{10, 20, 40, 80, 80, 80}
	for i, c := range ceilings {
		for range 200 {
			saved := b.attempt
			d := b.Next()
			b.attempt = saved
			if d < time.Millisecond || d > time.Millisecond+c*time.Millisecond {
				t.Fatalf("attempt %d: wait %v outside [1ms, %v]", i, d, time.Millisecond+c*time.Millisecond)
			}
		}
		b.Next()
	}
	if b.Attempts() != len(ceilings) {
		t.Fatalf("attempts = %d, want %d", b.Attempts(), len(ceilings))
	}
	b.Reset()
	if b.Attempts() != 0 {
		t.Fatal("Reset did not forget failures")
	}
}

func TestNextIsJittered(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Second}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[b.Next()] = true
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct waits out of 50: not jittered", len(seen))
	}
}

func TestLargeAttemptDoesNotOverflow(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute, attempt: 200}
	if d := b.Next(); d < 0 || d > time.Minute {
		t.Fatalf("wait %v out of range after many attempts", d)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err == nil {
		t.Fatal("Sleep on a cancelled context returned nil")
	}
}
