package input

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestSubscribeGapAcrossReadRestarts: when efo.Read returns (a fatal
// error such as AccessDenied, or the retry limit), shardReader.publish calls
// Read again after a full-jitter wait drawn from [0, 1s] for the first retry.
// Before the fix the new Read started with a zero lastSubscribe and subscribed
// at once:
// two SubscribeToShard calls for one shard less than a second apart, which AWS
// rejects with LimitExceeded (1 call/s per consumer and shard).
func TestSubscribeGapAcrossReadRestarts(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	arn, err := srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // ACTIVE after 200 ms
	var mu sync.Mutex
	var calls []time.Time
	srv.Control("SubscribeToShard", func(*kinesisfake.Request) (bool, int, []byte) {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return false, 0, nil
	})
	srv.FailNext("SubscribeToShard", 3, "AccessDeniedException")

	startStreamHarnessWith(t, srv, "", mustOpenStore(t), func(in *kinesisInput, client *kinesis.Client) recordPublisher {
		return in.efoPublisher(client, arn, "orders", nil)
	})
	waitUntil(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 4 })
	mu.Lock()
	defer mu.Unlock()
	gap := time.Hour
	for i := 1; i < len(calls); i++ {
		gap = min(gap, calls[i].Sub(calls[i-1]))
	}
	if gap < time.Second {
		t.Fatalf("two SubscribeToShard calls for one shard %v apart (%d calls, %d throttled): AWS allows one per second", gap.Round(time.Millisecond), len(calls), srv.Throttled("SubscribeToShard"))
	}
}
