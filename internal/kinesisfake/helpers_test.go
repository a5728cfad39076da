package kinesisfake

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
)

// testTimeout bounds every test's context: no test may hang.
const testTimeout = 60 * time.Second

func newServer(t testing.TB, opts ...Opt) *Server {
	t.Helper()
	s, err := New(append([]Opt{Logger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// newClient returns an SDK client without retries, so that every API error
// reaches the test.
func newClient(s *Server, optFns ...func(*kinesis.Options)) *kinesis.Client {
	return s.NewClient(append([]func(*kinesis.Options){func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }}, optFns...)...)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// errCode returns the AWS error code of err, or "" if there is none.
func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := errCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeClock is the fake's time for tests whose checks hang on quotas, status
// delays or lifetimes: it stands still until the test moves it on, so that
// how long a loaded machine takes between two calls no longer matters. Only
// the state's time is fake (quota buckets, statuses, iterator ages, the
// subscribe takeover window); timers, heartbeats and subscription lifetimes
// still run on real time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// withClock makes the server take its time from c.
func withClock(c *fakeClock) Opt { return func(cfg *config) { cfg.clock = c.now } }

// advanceAfterCalls moves c on by d once the server has received n calls of
// op, from a goroutine, and waits for that goroutine at the end of the test.
// A test that waits for a status with an SDK waiter uses it so that the
// waiter sees the old status at least once (the n-th call cannot arrive
// before the waiter has had the answer to the one before) and the new one
// after.
func advanceAfterCalls(t testing.TB, s *Server, c *fakeClock, op string, n int, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for s.Calls(op) < n {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
		c.advance(d)
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}
