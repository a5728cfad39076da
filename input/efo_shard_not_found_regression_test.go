package input

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestEFOShardNotFoundIsNotAGoneConsumer: with lazy registration, a
// SubscribeToShard answered ResourceNotFound for a shard (past the retention
// period, or its stream being deleted) while the consumer is still registered
// is the shard's error: it ends the shard's read, is counted and retried with
// the reader's backoff, and never registers the consumer again or ends the
// shard. Other shards read on.
//
// Before the fix the publisher took every ResourceNotFound for a gone
// consumer: it asked lazy registration for it again, which described the
// consumer, found it ACTIVE and returned the same ARN, and the publisher
// subscribed again a second later, for ever: one DescribeStreamConsumer per
// second per such shard (20 per second per stream is the quota, shared with
// every instance's startup), no backoff, and the error never surfaced.
func TestEFOShardNotFoundIsNotAGoneConsumer(t *testing.T) {
	t.Parallel()
	const gone, live = "shardId-000000000000", "shardId-000000000001"
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	// Registered and ACTIVE before the input starts: its lazy registration
	// then only describes it, once.
	if _, err := srv.RegisterConsumer("orders", "app"); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	srv.Control("SubscribeToShard", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ ShardId string }
		if json.Unmarshal(r.Body, &in) != nil || in.ShardId != gone {
			return false, 0, nil
		}
		attempts.Add(1)
		status, body := kinesisfake.ErrorBody("ResourceNotFoundException", "Shard "+gone+" in stream orders under account 000000000000 does not exist")
		return true, status, body
	})
	want := inputtest.Produced{}
	for d, pk := range fakeProducePerShard(t, srv, "orders", "a", 50, 5) {
		if strings.HasPrefix(d, "a-1-") { // the live shard's
			want[d] = pk
		}
	}

	dir := t.TempDir()
	logs := &inputtest.Logs{}
	metrics := &inputtest.Metrics{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, fakeInput(srv, "orders", dir, "efo: { consumer_name: app }"), out.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
	out.WaitFor(t, len(want), time.Minute)
	surfaced := func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=ERROR") && strings.Contains(line, "shard "+gone) &&
				strings.Contains(line, "ResourceNotFoundException") && strings.Contains(line, "still registered") {
				return true
			}
		}
		return false
	}
	start := time.Now()
	if !eventually(30*time.Second, surfaced) {
		t.Fatalf("in %v, %d subscribe attempts to %s answered ResourceNotFound made %d DescribeStreamConsumer and %d RegisterStreamConsumer calls, and the shard's error never surfaced:\n%s",
			time.Since(start).Round(time.Second), attempts.Load(), gone, srv.Calls("DescribeStreamConsumer"), srv.Calls("RegisterStreamConsumer"), logs.String())
	}
	// Retried, not taken for the shard's end.
	if !eventually(30*time.Second, func() bool { return attempts.Load() >= 2 }) {
		t.Fatalf("%s was not subscribed to again after its error", gone)
	}
	p.StopWhen(t, out, len(want), time.Minute)

	inputtest.CheckDelivery(t, out.All(), want, true)
	n := int(attempts.Load())
	if r := srv.Calls("RegisterStreamConsumer"); r != 0 {
		t.Errorf("%d RegisterStreamConsumer calls for a consumer that was never gone", r)
	}
	// One describe at startup, at most one per refused subscription.
	if d := srv.Calls("DescribeStreamConsumer"); d > 1+n {
		t.Errorf("%d DescribeStreamConsumer calls for %d refused subscriptions", d, n)
	}
	if strings.Contains(logs.String(), "registering it again") {
		t.Errorf("the consumer was taken for gone:\n%s", logs.String())
	}
	if c := metrics.Counter("kinesis_subscription_errors", "stream", "orders", "shard", gone, "class", "fatal"); c < 1 {
		t.Errorf("kinesis_subscription_errors of %s, class fatal: %d", gone, c)
	}
	if cp := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders")).Shards[gone]; cp.Ended {
		t.Errorf("%s was taken for ended: %+v", gone, cp)
	}
	t.Logf("%d subscriptions to %s refused, %d DescribeStreamConsumer calls", n, gone, srv.Calls("DescribeStreamConsumer"))
	if testing.Verbose() {
		t.Log(logs.String())
	}
}
