package efo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// These tests drive efo.Publisher.Read directly against the fake Kinesis,
// through the real SDK client over HTTP/2, with every timing of the publisher
// shortened through efo.Options: each fault takes a second or two instead of
// the tens of seconds of a whole pipeline.

const (
	pubStream   = "orders"
	pubConsumer = "app"
	shard0      = "shardId-000000000000"
	// readBound bounds a Read in a test; it is no measure. A test whose
	// broken behaviour would wait rather than fail has a shorter one,
	// failBound, so that it fails quickly.
	readBound = 10 * time.Second
	failBound = 5 * time.Second
)

// fanout is a fake Kinesis with one stream, its consumer registered and
// ACTIVE, a client, and a log of every SubscribeToShard call the fake
// received.
type fanout struct {
	srv    *kinesisfake.Server
	client *kinesis.Client
	arn    string // the consumer's ARN
	calls  *subscribeLog
}

// newFanout starts the fake over TLS (HTTP/2, as AWS serves SubscribeToShard),
// with quotas off, so that only what a test injects fails a call and the
// publisher's own SubscribeGap, which the test measures, is the only pacing,
// and with no takeover window, so that a renewal is not refused as a
// hand-over. opts come after these and may change them. script, if set,
// answers the n-th SubscribeToShard call (from 1) with the AWS error code it
// returns, or lets it through on "".
func newFanout(t *testing.T, shards int, script func(n int) string, opts ...kinesisfake.Opt) *fanout {
	t.Helper()
	base := []kinesisfake.Opt{
		kinesisfake.TLS(),
		kinesisfake.Quotas(false),
		kinesisfake.Stream(pubStream, shards),
		kinesisfake.SubscribeTakeoverWindow(0),
	}
	srv, err := kinesisfake.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	arn, err := srv.RegisterConsumer(pubStream, pubConsumer)
	if err != nil {
		t.Fatal(err)
	}
	return &fanout{srv: srv, client: srv.NewClient(), arn: arn, calls: watchSubscribes(srv, script)}
}

// put appends n records to a shard.
func (f *fanout) put(t *testing.T, shardID, prefix string, n int) {
	t.Helper()
	if err := f.srv.PutToShard(pubStream, shardID, n, func(i int) []byte {
		return fmt.Appendf(nil, "%s-%s-%d", prefix, shardID, i)
	}); err != nil {
		t.Fatal(err)
	}
}

// publisher returns a Publisher through the consumer with every timing
// shortened; set overrides what a test needs otherwise. Failed calls are kept
// in fails.
func (f *fanout) publisher(fails *failures, set func(*efo.Options)) *efo.Publisher {
	o := efo.Options{
		SubscribeGap:   50 * time.Millisecond,
		Watchdog:       5 * time.Second,
		RetryLimit:     3,
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     50 * time.Millisecond,
		Hooks:          efo.Hooks{Failed: fails.add},
	}
	if set != nil {
		set(&o)
	}
	return efo.New(f.client, f.arn, o)
}

// subscribeCall is one SubscribeToShard call as the fake received it.
type subscribeCall struct {
	at       time.Time
	shard    string
	consumer string
	start    string // StartingPosition.Type
	seq      string // StartingPosition.SequenceNumber
	refused  string // the error code the script answered, "" if served
}

type subscribeLog struct {
	mu    sync.Mutex
	calls []subscribeCall
}

func watchSubscribes(srv *kinesisfake.Server, script func(n int) string) *subscribeLog {
	l := &subscribeLog{}
	srv.Control("SubscribeToShard", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct {
			ConsumerARN      string
			ShardId          string
			StartingPosition struct{ Type, SequenceNumber string }
		}
		_ = json.Unmarshal(r.Body, &in)
		c := subscribeCall{at: time.Now(), shard: in.ShardId, consumer: in.ConsumerARN,
			start: in.StartingPosition.Type, seq: in.StartingPosition.SequenceNumber}
		l.mu.Lock()
		n := len(l.calls) + 1
		if script != nil {
			c.refused = script(n)
		}
		l.calls = append(l.calls, c)
		l.mu.Unlock()
		if c.refused == "" {
			return false, 0, nil
		}
		status, body := kinesisfake.ErrorBody(c.refused, "Refused by the test.")
		return true, status, body
	})
	return l
}

// of returns the calls for one shard, in the order received.
func (l *subscribeLog) of(shardID string) []subscribeCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []subscribeCall
	for _, c := range l.calls {
		if c.shard == shardID {
			out = append(out, c)
		}
	}
	return out
}

// failedCall is one call of efo.Hooks.Failed.
type failedCall struct {
	shard string
	class awserr.Class
	err   error
}

type failures struct {
	mu    sync.Mutex
	calls []failedCall
}

func (f *failures) add(shardID string, class awserr.Class, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, failedCall{shardID, class, err})
}

func (f *failures) all() []failedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]failedCall(nil), f.calls...)
}

// reading collects what one Read delivered; deliver runs on the reading
// goroutine while the test may look.
type reading struct {
	mu      sync.Mutex
	recs    []types.Record
	batches []shard.Batch
}

func (r *reading) deliver(_ context.Context, b shard.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b)
	r.recs = append(r.recs, b.Records...)
	return nil
}

func (r *reading) records() []types.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]types.Record(nil), r.recs...)
}

func (r *reading) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

// last is the sequence number of the last record delivered, "" if none.
func (r *reading) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		return ""
	}
	return aws.ToString(r.recs[len(r.recs)-1].SequenceNumber)
}

// errEnough is the cause with which read stops a Read that delivered all the
// test wanted.
var errEnough = errors.New("the test has the records it wanted")

// within returns a context of the test that ends after d.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// read runs p.Read of shardID from TRIM_HORIZON into r until the shard ends,
// Read fails, ctx ends, or r holds want records; the last is a clean stop, and
// read returns nil for it.
func read(ctx context.Context, p *efo.Publisher, shardID string, r *reading, want int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	err := p.Read(ctx, shardID, shard.Start{Kind: shard.TrimHorizon}, nil, func(ctx context.Context, b shard.Batch) error {
		_ = r.deliver(ctx, b)
		if r.count() >= want && !b.End {
			cancel(errEnough)
		}
		return nil
	})
	if errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), errEnough) {
		return nil
	}
	return err
}

// checkRecords fails unless got is exactly what the fake holds for the shard,
// each record once and in order; with prefix, a beginning of it is enough.
func checkRecords(t *testing.T, srv *kinesisfake.Server, shardID string, got []types.Record, prefix bool) {
	t.Helper()
	stored, err := srv.ShardRecords(pubStream, shardID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > len(stored) || (!prefix && len(got) != len(stored)) {
		t.Fatalf("shard %s: %d records delivered, the shard holds %d", shardID, len(got), len(stored))
	}
	for i, r := range got {
		if aws.ToString(r.SequenceNumber) != aws.ToString(stored[i].SequenceNumber) || string(r.Data) != string(stored[i].Data) {
			t.Fatalf("shard %s: record %d is %s %q, want %s %q (repeated, lost or out of order)", shardID, i,
				aws.ToString(r.SequenceNumber), r.Data, aws.ToString(stored[i].SequenceNumber), stored[i].Data)
		}
	}
}

// TestReadRenewsEndedSubscriptions: subscriptions that end after 100 ms while
// records keep coming are renewed from the last record delivered (the fake's
// continuation is that record), nothing is repeated or lost, and no two
// subscribe calls for the shard are closer than SubscribeGap, although each
// subscription ends well within it.
func TestReadRenewsEndedSubscriptions(t *testing.T) {
	t.Parallel()
	const gap = 250 * time.Millisecond
	f := newFanout(t, 1, nil, kinesisfake.SubscriptionLifetime(100*time.Millisecond))
	f.put(t, shard0, "pre", 20)
	r := &reading{}
	// What had been delivered when each subscription opened: Subscribed
	// runs on the reading goroutine, after the call and before the
	// subscription delivers.
	var before []string
	p := f.publisher(&failures{}, func(o *efo.Options) {
		o.SubscribeGap = gap
		o.Hooks.Subscribed = func(string, bool) { before = append(before, r.last()) }
	})

	const live = 30
	var producer sync.WaitGroup
	producer.Go(func() {
		for i := range live {
			time.Sleep(40 * time.Millisecond)
			if err := f.srv.PutToShard(pubStream, shard0, 1, func(int) []byte { return fmt.Appendf(nil, "live-%d", i) }); err != nil {
				t.Error(err)
				return
			}
		}
	})
	err := read(within(t, readBound), p, shard0, r, 20+live)
	producer.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, f.srv, shard0, r.records(), false)

	calls := f.calls.of(shard0)
	if len(calls) < 3 {
		t.Fatalf("%d subscribe calls over %d records coming for 1.2 s, with subscriptions of 100 ms: the test did not renew", len(calls), live)
	}
	for i := 1; i < len(calls); i++ {
		if d := calls[i].at.Sub(calls[i-1].at); d < gap {
			t.Errorf("subscribe calls %d and %d for the shard %v apart, SubscribeGap is %v", i, i+1, d, gap)
		}
	}
	if len(before) != len(calls) {
		t.Fatalf("%d subscriptions opened for %d calls, none refused", len(before), len(calls))
	}
	if calls[0].start != "TRIM_HORIZON" {
		t.Errorf("the first subscription started at %s, want TRIM_HORIZON", calls[0].start)
	}
	for i, c := range calls[1:] {
		if c.start != "AFTER_SEQUENCE_NUMBER" || c.seq != before[i+1] {
			t.Errorf("renewal %d started at %s %s, want AFTER_SEQUENCE_NUMBER %s: where the reading stopped", i+1, c.start, c.seq, before[i+1])
		}
	}
}

// TestReadRecoversUncounted: a subscribe call reset before its answer,
// connections cut mid-stream and InternalFailure exception frames mid-stream
// are recoverable: with a RetryLimit of 1 none of them ends the Read, and
// every record comes once, in order.
func TestReadRecoversUncounted(t *testing.T) {
	t.Parallel()
	f := newFanout(t, 1, nil, kinesisfake.MaxEventRecords(5))
	f.put(t, shard0, "pre", 100)
	f.srv.DropNext("SubscribeToShard", 1)
	f.srv.DropSubscriptionAfter(shard0, 2, 2)
	f.srv.FailSubscriptionAfter(shard0, 2, 1, "InternalFailureException")
	fails := &failures{}
	p := f.publisher(fails, func(o *efo.Options) { o.RetryLimit = 1 })
	r := &reading{}
	if err := read(within(t, readBound), p, shard0, r, 100); err != nil {
		t.Fatalf("Read ended: %v", err)
	}
	checkRecords(t, f.srv, shard0, r.records(), false)
	got := fails.all()
	if len(got) != 5 {
		t.Errorf("%d failed subscriptions, want the 5 injected: %v", len(got), got)
	}
	for _, c := range got {
		if c.class != awserr.Recoverable {
			t.Errorf("failure %v classed %v, want recoverable", c.err, c.class)
		}
	}
}

// TestReadRetriesResourceInUseOnHandOverBackoff: ResourceInUse (another
// subscription still holds the shard, a hand-over ends within 5 s) is retried
// on the short hand-over backoff (at most 2 s), not on the general one
// (a minute here), and not counted (RetryLimit 1).
func TestReadRetriesResourceInUseOnHandOverBackoff(t *testing.T) {
	t.Parallel()
	f := newFanout(t, 1, func(n int) string {
		if n <= 2 {
			return "ResourceInUseException"
		}
		return ""
	})
	f.put(t, shard0, "pre", 20)
	fails := &failures{}
	p := f.publisher(fails, func(o *efo.Options) {
		o.RetryLimit = 1
		o.BackoffInitial, o.BackoffMax = time.Minute, time.Minute
	})
	r := &reading{}
	if err := read(within(t, failBound), p, shard0, r, 20); err != nil {
		t.Fatalf("Read ended: %v (the hand-over backoff waits 2 s at most)", err)
	}
	checkRecords(t, f.srv, shard0, r.records(), false)
	calls := f.calls.of(shard0)
	if len(calls) != 3 {
		t.Fatalf("%d subscribe calls, want 3: two refused, one served", len(calls))
	}
	// The hand-over backoff waits at most 2 s, plus the 50 ms gap; the
	// general one here up to a minute.
	for i := 1; i < len(calls); i++ {
		if d := calls[i].at.Sub(calls[i-1].at); d > 3*time.Second {
			t.Errorf("%v between subscribe calls %d and %d after ResourceInUse: not the hand-over backoff", d, i, i+1)
		}
	}
	for _, c := range fails.all() {
		if c.class != awserr.Recoverable || !awserr.Is(c.err, "ResourceInUseException") {
			t.Errorf("failure %v classed %v, want ResourceInUse, recoverable", c.err, c.class)
		}
	}
}

// TestReadRetryLimit: LimitExceeded counts; RetryLimit of them in a row end
// the Read with an error that names the shard and the consumer, and fewer in a
// row, however many in all, do not.
func TestReadRetryLimit(t *testing.T) {
	t.Parallel()
	t.Run("reached", func(t *testing.T) {
		t.Parallel()
		f := newFanout(t, 1, func(int) string { return "LimitExceededException" })
		f.put(t, shard0, "pre", 10)
		p := f.publisher(&failures{}, func(o *efo.Options) { o.RetryLimit = 3 })
		r := &reading{}
		err := read(within(t, readBound), p, shard0, r, 10)
		var perr *efo.Error
		if !errors.As(err, &perr) {
			t.Fatalf("Read returned %v, want an *efo.Error", err)
		}
		// Throttling of SubscribeToShard keeps its class and counts toward
		// the limit (awserr.Decide): another process may hold the shard.
		if perr.Shard != shard0 || perr.Consumer != f.arn || perr.Class != awserr.Throttled || !awserr.Is(err, "LimitExceededException") {
			t.Errorf("error of shard %q, consumer %q, class %v, code %q; want %s, %s, throttled, LimitExceededException",
				perr.Shard, perr.Consumer, perr.Class, awserr.Code(err), shard0, f.arn)
		}
		for _, w := range []string{"3 failures in a row", shard0, f.arn} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		if n := len(f.calls.of(shard0)); n != 3 {
			t.Errorf("%d subscribe calls, want 3 (the limit)", n)
		}
		checkRecords(t, f.srv, shard0, r.records(), true)
	})
	t.Run("fewer in a row", func(t *testing.T) {
		t.Parallel()
		// Calls 1-2 refused, 3 delivers an event and is then cut, 4-5
		// refused: four refusals in all, never three in a row.
		f := newFanout(t, 1, func(n int) string {
			if n == 3 || n > 5 {
				return ""
			}
			return "LimitExceededException"
		}, kinesisfake.MaxEventRecords(5))
		f.srv.DropSubscriptionAfter(shard0, 1, 1)
		f.put(t, shard0, "pre", 20)
		p := f.publisher(&failures{}, func(o *efo.Options) { o.RetryLimit = 3 })
		r := &reading{}
		if err := read(within(t, readBound), p, shard0, r, 20); err != nil {
			t.Fatalf("Read ended: %v", err)
		}
		checkRecords(t, f.srv, shard0, r.records(), false)
		if n := len(f.calls.of(shard0)); n != 6 {
			t.Errorf("%d subscribe calls, want 6", n)
		}
	})
}

// TestReadWatchdog: a subscription silent for longer than Watchdog (no
// events, no heartbeats, the connection open) is replaced and the records
// come through the next one, and a subscribe call that gets no answer is given
// up. A quiet subscription that sends heartbeats is left alone.
func TestReadWatchdog(t *testing.T) {
	t.Parallel()
	// Long enough that a live subscription's answer and heartbeats always
	// come within it on a loaded machine: at 300 ms, with the package's other
	// tests running, a replacement call once got its answer too late and
	// was given up eight more times; at 1 s, the whole suite under -race on
	// two cores once starved the live subscription's heartbeats (every
	// 50 ms) for longer.
	const watchdog = 2 * time.Second
	t.Run("silent subscription", func(t *testing.T) {
		t.Parallel()
		f := newFanout(t, 1, nil, kinesisfake.SubscriptionHeartbeat(50*time.Millisecond))
		f.srv.StallSubscriptionAfter(shard0, 1, 0, time.Minute) // silent from its start
		f.put(t, shard0, "pre", 20)
		fails := &failures{}
		p := f.publisher(fails, func(o *efo.Options) { o.Watchdog = watchdog })

		ctx, cancel := context.WithTimeout(t.Context(), failBound+3*watchdog)
		defer cancel()
		r := &reading{}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- p.Read(ctx, shard0, shard.Start{Kind: shard.TrimHorizon}, nil, r.deliver) }()
		if !waitFor(ctx, func() bool { return r.count() >= 20 }) {
			t.Fatalf("%d of 20 records within %v: the silent subscription was not replaced", r.count(), failBound+3*watchdog)
		}
		took := time.Since(start)
		// Two watchdog periods of a quiet but live subscription.
		time.Sleep(2 * watchdog)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Read returned %v, want the test's cancellation", err)
		}
		checkRecords(t, f.srv, shard0, r.records(), false)
		if took < watchdog {
			t.Errorf("the records came after %v, before the watchdog period: the subscription was not silent", took)
		}
		if n := len(f.calls.of(shard0)); n != 2 {
			t.Errorf("%d subscribe calls, want 2: the silent one and its replacement, which heartbeats keep", n)
		}
		got := fails.all()
		if len(got) != 1 || got[0].class != awserr.Recoverable || !strings.Contains(got[0].err.Error(), "watchdog") {
			t.Errorf("failures %v, want one, recoverable, from the watchdog", got)
		}
	})
	t.Run("unanswered call", func(t *testing.T) {
		t.Parallel()
		f := newFanout(t, 1, nil)
		f.srv.DelayNext("SubscribeToShard", 1, time.Minute)
		f.put(t, shard0, "pre", 20)
		fails := &failures{}
		p := f.publisher(fails, func(o *efo.Options) { o.Watchdog = watchdog; o.RetryLimit = 1 })
		r := &reading{}
		if err := read(within(t, failBound), p, shard0, r, 20); err != nil {
			t.Fatalf("Read ended: %v (a subscribe call without an answer is to be given up after %v)", err, watchdog)
		}
		checkRecords(t, f.srv, shard0, r.records(), false)
		got := fails.all()
		if len(got) != 1 || got[0].class != awserr.Recoverable || !strings.Contains(got[0].err.Error(), "no answer") {
			t.Errorf("failures %v, want one, recoverable, for no answer", got)
		}
	})
}

// TestReadResourceNotFound: ResourceNotFound may mean that the consumer is
// gone. With Options.Reregister (here the lazy registration's
// efo.RegisterAgain, counted) a consumer deregistered while four shards read
// through it is registered again once, and every shard reads on through the
// new one from where it stopped; with the consumer still ACTIVE, Reregister
// (asked once) registers nothing and the Read ends with the error; without
// Reregister it ends at once.
func TestReadResourceNotFound(t *testing.T) {
	t.Parallel()
	// reregister returns a Reregister that counts its calls and keeps the
	// ARN it returned last.
	reregister := func(f *fanout, calls *atomic.Int32, last *atomic.Value) func(context.Context, string) (string, error) {
		return func(ctx context.Context, stale string) (string, error) {
			calls.Add(1)
			c, err := efo.RegisterAgain(ctx, f.client, f.srv.StreamARN(pubStream), pubConsumer, stale,
				efo.WaitOptions{BackoffInitial: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
			if err == nil {
				last.Store(c.ARN)
			}
			return c.ARN, err
		}
	}

	t.Run("consumer gone", func(t *testing.T) {
		t.Parallel()
		const shards = 4
		// A consumer's ARN ends in its creation time in seconds: the new one
		// is registered once the old one is gone, a second after it was
		// deregistered, so its ARN differs and the test can tell which one a
		// subscription used.
		f := newFanout(t, shards, nil,
			kinesisfake.ConsumerDeletionDelay(time.Second), kinesisfake.ConsumerActivationDelay(200*time.Millisecond))
		var ids []string
		for i := range shards {
			id := fmt.Sprintf("shardId-%012d", i)
			ids = append(ids, id)
			f.put(t, id, "pre", 20)
		}
		var calls atomic.Int32
		var newARN atomic.Value
		fails := &failures{}
		p := f.publisher(fails, func(o *efo.Options) { o.Reregister = reregister(f, &calls, &newARN) })

		ctx := within(t, failBound)
		rs := make([]*reading, shards)
		errs := make([]error, shards)
		var wg sync.WaitGroup
		for i, id := range ids {
			rs[i] = &reading{}
			wg.Go(func() { errs[i] = read(ctx, p, id, rs[i], 40) })
		}
		waitFor(ctx, func() bool {
			for _, r := range rs {
				if r.count() < 20 {
					return false
				}
			}
			return true
		})
		// Every shard is subscribed and has delivered: its subscription is
		// live when the consumer goes.
		if _, err := f.client.DeregisterStreamConsumer(t.Context(), &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(f.arn)}); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			f.put(t, id, "post", 20)
		}
		wg.Wait()

		for i, id := range ids {
			if errs[i] != nil {
				t.Errorf("shard %s: Read ended: %v", id, errs[i])
			}
			checkRecords(t, f.srv, id, rs[i].records(), false)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("Reregister called %d times, want once for the %d shards", n, shards)
		}
		if n := f.srv.Calls("RegisterStreamConsumer"); n != 1 {
			t.Errorf("%d RegisterStreamConsumer calls, want 1", n)
		}
		notFound := map[string]bool{}
		for _, c := range fails.all() {
			if awserr.Is(c.err, "ResourceNotFoundException") {
				notFound[c.shard] = true
			}
		}
		if len(notFound) != shards {
			t.Errorf("ResourceNotFound reached %d of the %d shards: the test did not cut them all", len(notFound), shards)
		}
		arn, _ := newARN.Load().(string)
		if arn == f.arn {
			t.Fatalf("the consumer registered again has the ARN of the old one, %s: the test cannot tell them apart", arn)
		}
		for _, id := range ids {
			calls := f.calls.of(id)
			if last := calls[len(calls)-1]; last.consumer != arn {
				t.Errorf("shard %s: last subscription as %s, want the consumer registered again, %s", id, last.consumer, arn)
			}
		}
	})

	t.Run("consumer still active", func(t *testing.T) {
		t.Parallel()
		f := newFanout(t, 1, func(int) string { return "ResourceNotFoundException" })
		f.put(t, shard0, "pre", 10)
		var calls atomic.Int32
		p := f.publisher(&failures{}, func(o *efo.Options) { o.Reregister = reregister(f, &calls, &atomic.Value{}) })
		r := &reading{}
		err := read(within(t, readBound), p, shard0, r, 10)
		var perr *efo.Error
		if !errors.As(err, &perr) || perr.Shard != shard0 || perr.Class != awserr.Fatal {
			t.Fatalf("Read returned %v, want a fatal *efo.Error of shard %s", err, shard0)
		}
		if !errors.Is(err, efo.ErrConsumerRegistered) || !awserr.Is(err, "ResourceNotFoundException") {
			t.Errorf("error %v does not wrap ResourceNotFound and ErrConsumerRegistered", err)
		}
		// Reregister is asked once; it describes the consumer, finds it
		// ACTIVE and registers nothing.
		if n := calls.Load(); n != 1 {
			t.Errorf("Reregister called %d times, want once", n)
		}
		if n := f.srv.Calls("RegisterStreamConsumer"); n != 0 {
			t.Errorf("%d RegisterStreamConsumer calls for a consumer that is there", n)
		}
		if n := len(f.calls.of(shard0)); n != 1 {
			t.Errorf("%d subscribe calls, want 1", n)
		}
		checkRecords(t, f.srv, shard0, r.records(), true)
	})

	t.Run("no Reregister", func(t *testing.T) {
		t.Parallel()
		f := newFanout(t, 1, func(int) string { return "ResourceNotFoundException" })
		p := f.publisher(&failures{}, nil)
		err := read(within(t, readBound), p, shard0, &reading{}, 1)
		var perr *efo.Error
		if !errors.As(err, &perr) || perr.Class != awserr.Fatal || !strings.Contains(err.Error(), "was the consumer deregistered?") {
			t.Fatalf("Read returned %v, want a fatal *efo.Error asking whether the consumer was deregistered", err)
		}
		if n := len(f.calls.of(shard0)); n != 1 {
			t.Errorf("%d subscribe calls, want 1", n)
		}
	})
}

// TestReadShardEnd: at the end of a closed shard Read returns nil after a
// batch with End set and the children listed, whether the end comes with the
// last records, in an empty event after them, or while the shard is read.
func TestReadShardEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		withRecords  bool
		whileReading bool
	}{
		{"with the last records", true, false},
		{"in an empty event", false, false},
		{"while reading", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFanout(t, 1, nil, kinesisfake.MaxEventRecords(10), kinesisfake.ShardEndWithRecords(tc.withRecords))
			f.put(t, shard0, "pre", 30)
			split := func() []string {
				children, err := f.srv.SplitShard(pubStream, shard0, "")
				if err != nil {
					t.Error(err)
				}
				return children
			}
			var children []string
			if !tc.whileReading {
				children = split()
			}
			p := f.publisher(&failures{}, nil)
			r := &reading{}
			errc := make(chan error, 1)
			go func() { errc <- read(within(t, readBound), p, shard0, r, 1<<30) }()
			if tc.whileReading {
				waitFor(within(t, readBound), func() bool { return r.count() >= 30 })
				children = split()
			}
			if err := <-errc; err != nil {
				t.Fatalf("Read returned %v, want nil at the shard's end", err)
			}
			checkRecords(t, f.srv, shard0, r.records(), false)
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, b := range r.batches[:len(r.batches)-1] {
				if b.End {
					t.Fatalf("batch %d of %d has End set", i+1, len(r.batches))
				}
			}
			last := r.batches[len(r.batches)-1]
			var got []string
			for _, c := range last.ChildShards {
				got = append(got, aws.ToString(c.ShardId))
			}
			if !last.End || strings.Join(got, ",") != strings.Join(children, ",") {
				t.Fatalf("last batch: End %v, children %v; want End and children %v", last.End, got, children)
			}
			if tc.withRecords && !tc.whileReading && len(last.Records) == 0 {
				t.Errorf("the end came with the last records, the batch with End has none")
			}
			// The end is seen in the event that carries it, not by
			// subscribing once more.
			if n := len(f.calls.of(shard0)); n != 1 {
				t.Errorf("%d subscribe calls, want 1", n)
			}
		})
	}
}

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
	p := efo.New(api, "arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1", efo.Options{
		Watchdog:       300 * time.Millisecond,
		SubscribeGap:   50 * time.Millisecond,
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     20 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Read(ctx, "shardId-000000000000", shard.Start{Kind: shard.TrimHorizon}, nil, func(context.Context, shard.Batch) error { return nil })
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
