package kinesisfake

import (
	"context"
	"errors"
	"log/slog"
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
