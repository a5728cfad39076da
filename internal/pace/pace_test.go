package pace

import (
	"context"
	"testing"
	"time"
)

func TestPacerKeepsTheGapPerKey(t *testing.T) {
	p := New(50 * time.Millisecond)
	ctx := context.Background()
	p.Done("a")
	start := time.Now()
	if err := p.Wait(ctx, "b"); err != nil || time.Since(start) > 20*time.Millisecond {
		t.Fatal("an unrelated key waited")
	}
	if err := p.Wait(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 45*time.Millisecond {
		t.Fatalf("waited %v, want about 50ms", waited)
	}
	p.Forget("a")
	start = time.Now()
	p.Wait(ctx, "a")
	if time.Since(start) > 20*time.Millisecond {
		t.Fatal("a forgotten key still waited")
	}
	p.Done("a")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Wait(cctx, "a"); err == nil {
		t.Fatal("Wait ignored a cancelled context")
	}
}
