package efo

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

type reviewSubscribeAPI func(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)

func (f reviewSubscribeAPI) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return f(ctx, in, optFns...)
}

// TestHungSubscribeCallIsReplaced: a SubscribeToShard call that never
// answers (the request reached a live connection, so HTTP/2 pings succeed,
// but no response headers or no initial-response event ever come) must be
// given up and retried like a silent subscription. The SDK's HTTP client has
// no response-header timeout and the call's context has no deadline.
//
// Before a fix the watchdog is only armed once the call has returned, so the
// shard stops being read, silently, for as long as the call hangs (forever).
func TestHungSubscribeCallIsReplaced(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	api := reviewSubscribeAPI(func(ctx context.Context, in *kinesis.SubscribeToShardInput, _ ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
		calls.Add(1)
		<-ctx.Done() // hangs until the caller gives up
		return nil, ctx.Err()
	})
	p := New(api, "arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1", Options{
		Watchdog:       300 * time.Millisecond,
		SubscribeGap:   50 * time.Millisecond,
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     20 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Read(ctx, "shardId-000000000000", shard.Start{Kind: shard.TrimHorizon}, func(context.Context, shard.Batch) error { return nil })
	}()
	deadline := time.Now().Add(30 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if n := calls.Load(); n < 2 {
		t.Fatalf("%d SubscribeToShard call(s) in 30 s with a 300 ms watchdog: a hung subscribe call is never given up, the shard stalls", n)
	}
}
