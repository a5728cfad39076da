package main

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// startDynalite starts dynalite with internal/emulator, the tests' way (its
// npm install, loopback port and preload), outside a test, behind the
// tests' proxy that counts the calls and the capacity units they consume:
// benchTB stands in for the testing.TB the package wants. Clients go to the
// proxy's Endpoint. stop kills both and removes what they left behind.
func startDynalite() (proxy *emulator.DynamoDBProxy, stop func(), err error) {
	tb := &benchTB{}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(benchFatal)
			if !ok {
				panic(r)
			}
			tb.cleanup()
			proxy, stop, err = nil, nil, fmt.Errorf("dynalite: %s", f)
		}
	}()
	proxy = emulator.NewDynamoDBProxy(tb, emulator.Dynalite(tb))
	return proxy, tb.cleanup, nil
}

// benchTB is the part of testing.TB that internal/emulator calls. The
// embedded interface is nil: it only gives the type testing.TB's method
// set, and a method not implemented here panics, as Fatal does, which
// startDynalite turns into an error.
type benchTB struct {
	testing.TB

	mu       sync.Mutex
	cleanups []func()
}

// benchFatal is what Fatal and Skip panic with.
type benchFatal string

func (*benchTB) Helper() {}

func (b *benchTB) Cleanup(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cleanups = append(b.cleanups, f)
}

// cleanup runs the cleanups, last first, as a test's end does.
func (b *benchTB) cleanup() {
	b.mu.Lock()
	fs := b.cleanups
	b.cleanups = nil
	b.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func (b *benchTB) TempDir() string {
	dir, err := os.MkdirTemp("", "kinesis-bench-dynalite-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (*benchTB) Fatal(args ...any) { panic(benchFatal(fmt.Sprint(args...))) }

func (*benchTB) Fatalf(format string, args ...any) { panic(benchFatal(fmt.Sprintf(format, args...))) }

func (*benchTB) Skipf(format string, args ...any) {
	panic(benchFatal("skipped: " + fmt.Sprintf(format, args...)))
}

// Error, Errorf and Logf report what the emulator says of itself (a stop
// that failed, an exit nobody asked for) on stderr.
func (b *benchTB) Error(args ...any) { b.Logf("%s", fmt.Sprint(args...)) }

func (b *benchTB) Errorf(format string, args ...any) { b.Logf(format, args...) }

func (*benchTB) Logf(format string, args ...any) {
	fmt.Fprintln(os.Stderr, "kinesis-bench:", fmt.Sprintf(format, args...))
}
