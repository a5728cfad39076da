// Command install-emulators installs the npm emulators the integration tests use
// (kinesis-local and dynalite, at pinned versions) into the emulator
// directory, so that CI can do it once before `go test` and cache it:
//
//	go run ./cmd/install-emulators
//
// The directory is .cache/emulators under the module root, or the value of
// BENTHOS_KINESIS_EMULATORS_DIR. Nothing is downloaded when it is already
// installed. It exits non-zero, saying why, when Node.js or npm is missing.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

func main() {
	dir, err := emulator.Dir()
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if err := emulator.Install(ctx); err != nil {
		fail(err)
	}
	fmt.Printf("emulators ready in %s (%s)\n", dir, time.Since(start).Round(time.Millisecond))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "install:", err)
	os.Exit(1)
}
