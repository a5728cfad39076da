package input

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// subscribeLog records when each shard was subscribed, through the fake's
// control hook.
type subscribeLog struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func watchSubscribes(srv *kinesisfake.Server) *subscribeLog {
	l := &subscribeLog{calls: map[string][]time.Time{}}
	srv.Control("SubscribeToShard", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ ShardId string }
		json.Unmarshal(r.Body, &in)
		l.mu.Lock()
		l.calls[in.ShardId] = append(l.calls[in.ShardId], time.Now())
		l.mu.Unlock()
		return false, 0, nil
	})
	return l
}

// minGap returns the shortest gap between two subscribe calls of one shard,
// and the number of calls.
func (l *subscribeLog) minGap() (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gap, n := time.Hour, 0
	for _, ts := range l.calls {
		n += len(ts)
		for i := 1; i < len(ts); i++ {
			gap = min(gap, ts[i].Sub(ts[i-1]))
		}
	}
	return gap, n
}

// TestEFOResubscribesWithoutLossOrDuplicates: with subscriptions lasting 2 s,
// 12 s of continuous production come through exactly once, in order, and no
// shard is ever subscribed twice within a second.
func TestEFOResubscribesWithoutLossOrDuplicates(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4), kinesisfake.SubscriptionLifetime(2*time.Second))
	subs := watchSubscribes(srv)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out)
	want := produceFor(t, srv, "orders", "r", 12*time.Second, 500)
	p.StopWhen(t, out, len(want), time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	gap, n := subs.minGap()
	if n < 4*4 {
		t.Fatalf("only %d subscribe calls in 12 s with a 2 s lifetime: the test did not resubscribe", n)
	}
	if gap < time.Second {
		t.Fatalf("two subscribe calls for one shard %v apart: AWS allows one per second", gap)
	}
	if th := srv.Throttled("SubscribeToShard"); th != 0 {
		t.Fatalf("%d subscribe calls throttled", th)
	}
	t.Logf("%d records, %d subscribe calls, shortest gap per shard %v", len(want), n, gap.Round(time.Millisecond))
}

// TestEFORecoversFromFaults injects connection drops, a ResourceInUse storm,
// LimitExceeded below the retry limit and an exception frame mid-stream:
// nothing is lost and no error is logged. (Short backoffs: the test is about
// recovering, not the waits.)
func TestEFORecoversFromFaults(t *testing.T) {
	t.Parallel()
	// A short hand-over window: after each cut AWS refuses a new
	// subscription for up to 5 s; the test is about recovering, not waiting.
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2), kinesisfake.SubscriptionHeartbeat(200*time.Millisecond),
		kinesisfake.SubscribeTakeoverWindow(time.Second))
	logs := &inputtest.Logs{}
	out := &inputtest.Collector{}
	want := fakeProduce(t, srv, "orders", "a", 2000, 17)
	srv.DropSubscriptionAfter("", 3, 2)                             // connections cut mid-stream
	srv.FailNext("SubscribeToShard", 20, "ResourceInUseException")  // a hand-over storm
	srv.FailSubscriptionAfter("", 2, 1, "InternalFailureException") // exception frames mid-stream
	p := inputtest.StartPipelineWith(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out.Consume,
		inputtest.Options{Input: fastTimersInput, Logs: logs})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	})
	out.WaitFor(t, len(want)/2, time.Minute)
	srv.FailNext("SubscribeToShard", 5, "LimitExceededException") // retryable, below the limit of 10
	srv.DropSubscriptionAfter("", 2, 0)
	for d, pk := range fakeProduce(t, srv, "orders", "b", 2000, 17) {
		want[d] = pk
	}
	p.StopWhen(t, out, len(want), 2*time.Minute)
	inputtest.CheckDelivery(t, out.All(), want, true)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("recoverable faults were logged as errors:\n%s", logs)
	}
}

// TestEFORetryLimitSurfacesClearly: LimitExceeded on every subscribe beyond
// the retry limit surfaces as an error that says what is wrong; the shard is
// read again afterwards and nothing is lost. (Short backoffs: the test is
// about the limit, not the waits.)
func TestEFORetryLimitSurfacesClearly(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	srv.FailNext("SubscribeToShard", 12, "LimitExceededException")
	want := fakeProduce(t, srv, "orders", "a", 300, 7)
	logs := &inputtest.Logs{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out.Consume, inputtest.Options{Input: fastTimersInput, Logs: logs})
	out.WaitFor(t, len(want), 3*time.Minute)
	p.Stop(t)
	inputtest.CheckDelivery(t, out.All(), want, true)
	text := logs.String()
	for _, w := range []string{"level=ERROR", "LimitExceededException", "10 failures in a row", "shardId-000000000000", "1 call per second per shard"} {
		if !strings.Contains(text, w) {
			t.Fatalf("logs lack %q:\n%s", w, text)
		}
	}
}

// fastTimersInput is the input under another name whose fan-out publisher
// has a watchdog of fastWatchdog instead of 35 s and backs off 100 to 500 ms
// instead of 1 to 10 s after a failure (its pace of one subscribe a second
// per shard stays): tests that wait for those timers take seconds.
const (
	fastTimersInput = "aws_kinesis_streams_fast_timers"
	fastWatchdog    = 3 * time.Second
)

func init() {
	err := service.RegisterBatchInput(fastTimersInput, Spec(), func(pc *service.ParsedConfig, res *service.Resources) (service.BatchInput, error) {
		in, err := newInput(pc, res)
		if err != nil {
			return nil, err
		}
		in.efoTune = func(o *efo.Options) {
			o.Watchdog = fastWatchdog
			o.BackoffInitial, o.BackoffMax = 100*time.Millisecond, 500*time.Millisecond
		}
		return in, nil
	})
	if err != nil {
		panic(err)
	}
}

// TestEFOWatchdogReplacesStalledSubscription: a subscription that goes silent
// (connection open, no events, no heartbeats; for 10 minutes, so only a
// replacement can deliver within the test's minute) is replaced after the
// watchdog (35 s; 3 s here), and nothing is lost.
func TestEFOWatchdogReplacesStalledSubscription(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1), kinesisfake.SubscriptionHeartbeat(time.Second))
	srv.StallSubscriptionAfter("", 1, 0, 10*time.Minute) // silent right after the initial response
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out.Consume, inputtest.Options{Input: fastTimersInput})
	for srv.Calls("SubscribeToShard") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	want := fakeProduce(t, srv, "orders", "s", 200, 7)
	out.WaitFor(t, len(want), time.Minute)
	waited := time.Since(start)
	p.Stop(t)
	inputtest.CheckDelivery(t, out.All(), want, true)
	if waited < fastWatchdog*2/3 {
		t.Fatalf("records came after %v: the subscription was not stalled, the test proved nothing", waited)
	}
	t.Logf("the stalled subscription was replaced after %v", waited.Round(time.Millisecond))
}

// TestEFOBadConsumerStates: a consumer being deleted, and credentials that
// may not describe or subscribe, each get an error that says what is wrong.
func TestEFOBadConsumerStates(t *testing.T) {
	t.Parallel()
	t.Run("eager, consumer DELETING", func(t *testing.T) {
		t.Parallel()
		srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1), kinesisfake.ConsumerDeletionDelay(time.Hour))
		arn, err := srv.RegisterConsumer("orders", "app")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.NewClient().DeregisterStreamConsumer(t.Context(), &kinesis.DeregisterStreamConsumerInput{ConsumerARN: &arn}); err != nil {
			t.Fatal(err)
		}
		err = connectErr(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app, registration: eager }"))
		for _, w := range []string{"consumer app", "stream/orders", "being deleted (DELETING)"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("got %v, want an error containing %q", err, w)
			}
		}
	})
	t.Run("eager, not registered", func(t *testing.T) {
		t.Parallel()
		srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
		err := connectErr(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app, registration: eager }"))
		for _, w := range []string{"consumer app", "is not registered", "benthos-kinesis efo register --stream", "registration: lazy"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("got %v, want an error containing %q", err, w)
			}
		}
	})
	t.Run("lazy, consumer DELETING", func(t *testing.T) {
		t.Parallel()
		srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1), kinesisfake.ConsumerDeletionDelay(3*time.Second))
		arn, err := srv.RegisterConsumer("orders", "app")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.NewClient().DeregisterStreamConsumer(t.Context(), &kinesis.DeregisterStreamConsumerInput{ConsumerARN: &arn}); err != nil {
			t.Fatal(err)
		}
		want := fakeProduce(t, srv, "orders", "d", 50, 3)
		logs := &inputtest.Logs{}
		out := &inputtest.Collector{}
		p := inputtest.StartPipelineLogged(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out, logs)
		out.WaitFor(t, len(want), time.Minute)
		p.Stop(t)
		if !strings.Contains(logs.String(), "is being deleted (DELETING); waiting for it to go") {
			t.Fatalf("no warning about the consumer being deleted:\n%s", logs)
		}
	})
	t.Run("access denied", func(t *testing.T) {
		t.Parallel()
		srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
		srv.FailNext("DescribeStreamConsumer", 1, "AccessDeniedException")
		err := connectErr(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"))
		for _, w := range []string{"consumer app", "AccessDeniedException", "kinesis:DescribeStreamConsumer", "kinesis:RegisterStreamConsumer"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("got %v, want an error containing %q", err, w)
			}
		}
	})
	t.Run("subscribe access denied", func(t *testing.T) {
		t.Parallel()
		srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
		srv.FailNext("SubscribeToShard", 1, "AccessDeniedException")
		want := fakeProduce(t, srv, "orders", "d", 50, 3)
		logs := &inputtest.Logs{}
		out := &inputtest.Collector{}
		p := inputtest.StartPipelineLogged(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out, logs)
		out.WaitFor(t, len(want), time.Minute)
		p.Stop(t)
		text := logs.String()
		for _, w := range []string{"level=ERROR", "AccessDeniedException", "kinesis:SubscribeToShard", "shardId-000000000000"} {
			if !strings.Contains(text, w) {
				t.Fatalf("logs lack %q:\n%s", w, text)
			}
		}
	})
}

// TestEFOLazyRegistersAGoneConsumerAgain: a consumer deregistered while the
// input reads through it (lazy registration) is registered again, and reading
// goes on from where it stopped; ResourceNotFound is never taken for the end
// of a shard.
func TestEFOLazyRegistersAGoneConsumerAgain(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2), kinesisfake.ConsumerDeletionDelay(500*time.Millisecond))
	want := fakeProduce(t, srv, "orders", "a", 500, 11)
	logs := &inputtest.Logs{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineLogged(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out, logs)
	out.WaitFor(t, len(want), time.Minute)
	arn := srv.ConsumerARN("orders", "app")
	if _, err := srv.NewClient().DeregisterStreamConsumer(t.Context(), &kinesis.DeregisterStreamConsumerInput{ConsumerARN: &arn}); err != nil {
		t.Fatal(err)
	}
	for d, pk := range fakeProduce(t, srv, "orders", "b", 500, 11) {
		want[d] = pk
	}
	p.StopWhen(t, out, len(want), time.Minute)
	inputtest.CheckDelivery(t, out.All(), want, true)
	// The ARN may come back the same: it ends in the creation time in seconds.
	if n := srv.Calls("RegisterStreamConsumer"); !strings.Contains(logs.String(), "is gone") || n != 2 {
		t.Fatalf("the consumer was not registered again (%d RegisterStreamConsumer calls, want 2):\n%s", n, logs)
	}
}

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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
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
	if !inputtest.Eventually(30*time.Second, surfaced) {
		t.Fatalf("in %v, %d subscribe attempts to %s answered ResourceNotFound made %d DescribeStreamConsumer and %d RegisterStreamConsumer calls, and the shard's error never surfaced:\n%s",
			time.Since(start).Round(time.Second), attempts.Load(), gone, srv.Calls("DescribeStreamConsumer"), srv.Calls("RegisterStreamConsumer"), logs.String())
	}
	// Retried, not taken for the shard's end.
	if !inputtest.Eventually(30*time.Second, func() bool { return attempts.Load() >= 2 }) {
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
