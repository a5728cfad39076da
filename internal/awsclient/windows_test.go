package awsclient

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestStreamWindowsShareTheirBytes: the windows of the shards reading
// together stay within the share (above one frame each), the largest power
// of two that fits, up to 1 MiB; each size gets a transport of its own,
// reused.
func TestStreamWindowsShareTheirBytes(t *testing.T) {
	w := NewStreamWindows(8<<20, nil)
	var leaves []func()
	join := func(n int) {
		for range n {
			leaves = append(leaves, w.Join())
		}
	}
	for _, c := range []struct {
		shards int
		want   int64
	}{{1, 1 << 20}, {8, 1 << 20}, {9, 512 << 10}, {100, 64 << 10}, {512, 16 << 10}, {1024, MinStreamWindow}} {
		join(c.shards - len(leaves))
		if got := w.Window(); got != c.want {
			t.Errorf("%d shards: window %d, want %d", c.shards, got, c.want)
		}
	}
	var a, b kinesis.Options
	w.Option(&a)
	w.Option(&b)
	if a.HTTPClient == nil || a.HTTPClient != b.HTTPClient {
		t.Fatal("two subscriptions of one window size got different clients")
	}
	for _, leave := range leaves[1:] {
		leave()
		leave() // twice is harmless
	}
	if got := w.Window(); got != 1<<20 {
		t.Fatalf("one shard left: window %d, want 1 MiB", got)
	}
	var c kinesis.Options
	w.Option(&c)
	if c.HTTPClient == a.HTTPClient {
		t.Fatal("a 1 MiB window shares the 16 KiB window's client")
	}
}
