package emulator

import (
	"strings"
	"testing"
	"time"
)

// TestEmulatorsEndWithTheirTest checks that no emulator process outlives the
// test that started it.
func TestEmulatorsEndWithTheirTest(t *testing.T) {
	t.Parallel()
	pids := map[string]int{}
	t.Run("kinesis-local", func(t *testing.T) { pids[t.Name()] = KinesisLocal(t).PID() })
	t.Run("dynalite", func(t *testing.T) { pids[t.Name()] = Dynalite(t).PID() })
	for name, pid := range pids {
		if processExists(pid) || processExists(-pid) {
			t.Errorf("%s: process (group) %d still exists after its test ended", name, pid)
		}
	}
}

// TestEmulatorEndsAfterItsLifetime checks the preload's bound for an
// emulator whose test binary never stops it (e.g. a hung test).
func TestEmulatorEndsAfterItsLifetime(t *testing.T) {
	t.Parallel()
	// The lifetime counts from the process start, so it must outlast a slow
	// start on a loaded machine (or the emulator ends before Dynalite has
	// seen it answer); 30 s after the start returned it must be over.
	d := Dynalite(t, WithLifetime(10*time.Second))
	select {
	case <-d.proc.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("dynalite still running 30 s into a 10 s lifetime")
	}
	if out := d.proc.out.String(); !strings.Contains(out, "lifetime") {
		t.Fatalf("dynalite exited without the lifetime message; output:\n%s", out)
	}
}
