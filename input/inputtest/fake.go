package inputtest

import (
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// NewFake starts the in-process fake Kinesis over TLS with HTTP/2, as AWS
// serves fan-out, with consumers active and deleted within 200 ms; it stops
// with the test.
func NewFake(t testing.TB, opts ...kinesisfake.Opt) *kinesisfake.Server {
	t.Helper()
	base := []kinesisfake.Opt{kinesisfake.TLS(), kinesisfake.ConsumerActivationDelay(200 * time.Millisecond), kinesisfake.ConsumerDeletionDelay(200 * time.Millisecond)}
	srv, err := kinesisfake.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// OpenFileStore opens a checkpoint directory of the test's own; it closes
// with the test.
func OpenFileStore(t testing.TB) *checkpoint.File {
	t.Helper()
	f, err := checkpoint.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
