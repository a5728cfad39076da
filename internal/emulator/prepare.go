package emulator

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// installTimeout bounds a first install of the npm packages (measured here:
// about 5 s with a warm network; npm can be much slower on a cold CI cache).
const installTimeout = 5 * time.Minute

// prepare makes sure emulator can run for t and returns the node binary and
// the npm prefix holding the pinned packages. It skips t only when the
// developer asked for it with BENTHOS_KINESIS_SKIP_EMULATORS; a missing
// Node.js or a failed install fails t with what to do about it.
func prepare(t testing.TB, emulator string) (node, dir string) {
	t.Helper()
	if v := os.Getenv(EnvSkip); v != "" {
		skip, err := strconv.ParseBool(v)
		if err != nil {
			t.Fatalf("emulator: %s=%q is not a boolean; set it to 1 to skip emulator tests", EnvSkip, v)
		}
		if skip {
			t.Skipf("emulator: %s=%s: skipping a test that needs %s", EnvSkip, v, emulator)
		}
	}
	node, err := nodeBinary()
	if err != nil {
		t.Fatalf("emulator: %s needs Node.js 20 or newer (with npm) on PATH: %v\n"+
			"Install Node.js to run the integration tests, or set %s=1 to skip them on purpose.",
			emulator, err, EnvSkip)
	}
	dir, err = Dir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	if dl, ok := testDeadline(t); ok {
		var cancelDL context.CancelFunc
		ctx, cancelDL = context.WithDeadline(ctx, dl)
		defer cancelDL()
	}
	if err := installInto(ctx, dir); err != nil {
		t.Fatalf("%v\nTo install ahead of the tests run: go run ./cmd/install-emulators", err)
	}
	return node, dir
}

// testDeadline is the go test -timeout deadline when t knows it.
func testDeadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
