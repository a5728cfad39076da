package efo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

const (
	startupStream    = "orders"
	startupConsumer  = "app"
	startupInstances = 8
	startupShards    = 64
	startupPreload   = 50                     // records in every shard before the start
	startupLive      = 2                      // live records every shard must deliver to count as steady
	startupPutEvery  = 250 * time.Millisecond // the producer's cadence: 4 records/s per shard
	startupActivate  = 2 * time.Second        // CREATING time of a consumer, a few seconds as on AWS
	startupDeadline  = 60 * time.Second       // bound of one strategy's run, not a measure
)

// startupOps are the control-plane operations whose calls are counted: the
// five an EFO startup could make, plus DescribeStream and ListShards, which
// none of the strategies should need (shards come from the test, as a lease
// table would hand them out).
var startupOps = []string{
	"RegisterStreamConsumer", "DescribeStreamConsumer", "ListStreamConsumers",
	"DeregisterStreamConsumer", "DescribeStreamSummary", "DescribeStream", "ListShards",
}

// TestStartupAtScale starts 8 instances at the same moment against a 64-shard
// stream on the fake Kinesis with the AWS quotas enforced, once for each
// registration strategy (lazy, eager, none), and reports how long they take to
// read and how many control-plane calls they make (issue 3, "Must show" 5).
//
// The input has no shard-lease coordination yet, so the instances share one
// consumer and instance i reads the shards whose index is i modulo 8, a fixed
// eighth, as a lease table would hand them out. Each instance has its own SDK
// client (its own HTTP/2 connection, like a separate process) and reads each
// of its shards from TRIM_HORIZON with efo.Publisher.Read in a goroutine of
// its own. Every strategy gets a fresh fake (one shared by its 8 instances)
// with the same data: 50 records preloaded in every shard and a producer
// writing 4 records/s to every shard during the run.
//
//   - lazy: every instance calls efo.Register; the 8 race, one registration
//     wins, the others see ResourceInUse (or LimitExceeded: 5 registrations/s
//     per account) and wait for the winner's consumer to become ACTIVE.
//   - eager: the consumer is registered by the test beforehand (as the
//     `benthos-kinesis efo register` command does, not counted); every
//     instance calls efo.Describe.
//   - none: every instance is given the consumer ARN (registered beforehand)
//     and subscribes at once.
//
// "No error" means: Register and Describe return no error; Read returns
// nothing but the cancellation the test causes at the end; efo.Hooks.Failed is
// never called (no subscription fails, in any class, throttling included);
// no subscription is renewed (Hooks.Subscribed never reports a resubscribe);
// and neither the publishers nor the registration log a warning or an error.
// Throttled control-plane calls during registration are not errors: they are
// what the quotas do to a racing start, the registration code retries them,
// and the report counts them. Steady reading means every shard of every
// instance has delivered all its preloaded records and at least 2 records
// written after the start. Then the producer stops, every shard must deliver
// exactly what the stream holds (in order, no duplicates, none missing), and
// the readers are stopped.
//
// Times are from the release of the instances: to each instance's first
// record (min/median/max over the 8), to the moment every one of the 64 shards
// has delivered a record, and to steady reading.
func TestStartupAtScale(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts 8 instances on 64 shards three times; takes about 6 s")
	}
	// The strategies run side by side, each on a fake of its own (quotas
	// are per fake): the times are reported, not checked.
	strategies := []string{"lazy", "eager", "none"}
	results := make([]startupResult, len(strategies))
	t.Run("strategies", func(t *testing.T) {
		for i, strategy := range strategies {
			t.Run(strategy, func(t *testing.T) {
				t.Parallel()
				results[i] = runStartup(t, strategy)
			})
		}
	})

	reported := append([]string{"SubscribeToShard"}, startupOps...)
	t.Logf("%d instances x %d shards (%d each), consumer CREATING for %v, AWS quotas on; times from the start of the instances",
		startupInstances, startupShards, startupShards/startupInstances, startupActivate)
	t.Logf("%-8s | %-26s | %-26s | %-11s | %-9s | %-55s | %s",
		"strategy", "ARN in hand min/med/max", "first record min/med/max", "64 reading", "steady", "calls (server side, SDK retries included)", "throttled")
	for _, r := range results {
		t.Logf("%-8s | %-26s | %-26s | %-11v | %-9v | %-55s | %s",
			r.strategy, spread(r.ready), spread(r.first), ms(r.allShards), ms(r.steady),
			counts(r.calls, reported), counts(r.throttled, reported))
	}
	for _, r := range results {
		if r.strategy == "lazy" {
			t.Logf("lazy RegisterStreamConsumer as the instances saw it (after SDK retries): ok=%d %s", r.registerOK, codes(r.registerErr))
		}
	}
}

// startupInstance is one of the instances: its own client and its eighth of
// the shards.
type startupInstance struct {
	index  int
	client *kinesis.Client
	api    *countingAPI
	shards []*shardLog

	ready time.Duration // consumer ARN in hand
	err   error         // from Register or Describe
}

func runStartup(t *testing.T, strategy string) startupResult {
	srv, err := kinesisfake.New(
		kinesisfake.TLS(),
		kinesisfake.Quotas(true),
		kinesisfake.Stream(startupStream, startupShards),
		kinesisfake.ConsumerActivationDelay(startupActivate),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(t.Context(), startupDeadline)
	defer cancel()

	shards, err := srv.Shards(startupStream)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != startupShards {
		t.Fatalf("the fake made %d shards, want %d", len(shards), startupShards)
	}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if err := srv.PutToShard(startupStream, id, startupPreload, func(i int) []byte {
			return fmt.Appendf(nil, "pre-%s-%d", id, i)
		}); err != nil {
			t.Fatal(err)
		}
	}
	streamARN := srv.StreamARN(startupStream)

	// eager and none: the consumer exists before the instances start.
	var givenARN string
	if strategy != "lazy" {
		c, err := efo.Register(ctx, srv.NewClient(), streamARN, startupConsumer, efo.WaitOptions{})
		if err != nil {
			t.Fatalf("registering the consumer beforehand: %v", err)
		}
		givenARN = c.ARN
	}

	logs := &complaints{}
	var (
		fmu      sync.Mutex
		failures []failure
	)
	instances := make([]*startupInstance, startupInstances)
	for i := range instances {
		client := srv.NewClient()
		instances[i] = &startupInstance{index: i, client: client, api: &countingAPI{api: client}}
	}
	var all []*shardLog
	for i, sh := range shards {
		l := &shardLog{id: aws.ToString(sh.ShardId)}
		in := instances[i%startupInstances]
		in.shards = append(in.shards, l)
		all = append(all, l)
	}

	callsBefore, throttledBefore := snapshot(srv, append([]string{"SubscribeToShard"}, startupOps...))

	// The instances wait at the gate; start is written before the gate
	// opens, so they read it safely.
	gate := make(chan struct{})
	var start time.Time
	var wg sync.WaitGroup
	for _, in := range instances {
		wg.Go(func() {
			<-gate
			arn := givenARN
			switch strategy {
			case "lazy":
				c, err := efo.Register(ctx, in.api, streamARN, startupConsumer, efo.WaitOptions{Logger: logs})
				arn, in.err = c.ARN, err
			case "eager":
				c, err := efo.Describe(ctx, in.api, streamARN, startupConsumer, efo.WaitOptions{Logger: logs})
				arn, in.err = c.ARN, err
			}
			in.ready = time.Since(start)
			if in.err != nil {
				return
			}
			pub := efo.New(in.client, arn, efo.Options{
				Logger: logs,
				Hooks: efo.Hooks{
					Subscribed: func(shardID string, resubscribe bool) {
						for _, l := range in.shards {
							if l.id == shardID {
								l.subscribed(resubscribe)
							}
						}
					},
					Failed: func(shardID string, class awserr.Class, err error) {
						fmu.Lock()
						defer fmu.Unlock()
						failures = append(failures, failure{in.index, shardID, class, err})
					},
				},
			})
			var reads sync.WaitGroup
			for _, l := range in.shards {
				reads.Go(func() {
					err := pub.Read(ctx, l.id, shard.Start{Kind: shard.TrimHorizon}, nil, l.deliver)
					l.mu.Lock()
					l.readErr, l.finished = err, true
					l.mu.Unlock()
				})
			}
			reads.Wait()
		})
	}

	start = time.Now()
	for _, l := range all {
		l.run = start
	}
	close(gate)

	// The producer writes a record to every shard every startupPutEvery
	// until it is stopped.
	produce, stopProducing := context.WithCancel(ctx)
	var producer sync.WaitGroup
	var produceErr error
	producer.Go(func() {
		tick := time.NewTicker(startupPutEvery)
		defer tick.Stop()
		for n := 0; ; n++ {
			for _, l := range all {
				if err := srv.PutToShard(startupStream, l.id, 1, func(int) []byte {
					return fmt.Appendf(nil, "live-%s-%d", l.id, n)
				}); err != nil {
					produceErr = err
					return
				}
			}
			select {
			case <-produce.Done():
				return
			case <-tick.C:
			}
		}
	})

	res := startupResult{strategy: strategy}
	steady := waitFor(ctx, func() bool {
		for _, l := range all {
			if n, _ := l.progress(); n < startupPreload+startupLive {
				return false
			}
		}
		return true
	})
	if steady {
		res.steady = time.Since(start)
	}
	stopProducing()
	producer.Wait()
	if produceErr != nil {
		t.Errorf("producer: %v", produceErr)
	}

	// Drain: every shard must deliver everything the stream holds.
	want := map[string]int{}
	for _, l := range all {
		recs, err := srv.ShardRecords(startupStream, l.id)
		if err != nil {
			t.Error(err) // the readers are still running: no Fatal before they are joined
		}
		want[l.id] = len(recs)
	}
	drained := steady && waitFor(ctx, func() bool {
		for _, l := range all {
			if n, _ := l.progress(); n < want[l.id] {
				return false
			}
		}
		return true
	})
	timedOut := ctx.Err() != nil
	cancel()
	wg.Wait()

	callsAfter, throttledAfter := snapshot(srv, append([]string{"SubscribeToShard"}, startupOps...))
	res.calls = delta(callsAfter, callsBefore)
	res.throttled = delta(throttledAfter, throttledBefore)

	// What was measured.
	for _, in := range instances {
		res.ready = append(res.ready, in.ready)
		var first time.Duration
		for _, l := range in.shards {
			if _, f := l.progress(); f > 0 && (first == 0 || f < first) {
				first = f
			}
		}
		if first > 0 {
			res.first = append(res.first, first)
		}
		res.registerOK += in.api.get("RegisterStreamConsumer", "ok")
	}
	for _, l := range all {
		if _, f := l.progress(); f > res.allShards {
			res.allShards = f
		}
	}
	res.registerErr = map[string]int{}
	for _, code := range []string{"ResourceInUseException", "LimitExceededException", "error"} {
		for _, in := range instances {
			if n := in.api.get("RegisterStreamConsumer", code); n > 0 {
				res.registerErr[code] += n
			}
		}
	}
	res.failures = len(failures)

	// The promise: no error.
	if !steady || !drained {
		t.Errorf("%s: not every shard reached steady reading and drained within %v (steady=%v drained=%v timed out=%v)",
			strategy, startupDeadline, steady, drained, timedOut)
		for _, l := range all {
			if n, _ := l.progress(); n < want[l.id] {
				t.Logf("shard %s: %d of %d records delivered", l.id, n, want[l.id])
			}
		}
	}
	for _, in := range instances {
		if in.err != nil {
			t.Errorf("instance %d: %s: %v", in.index, strategy, in.err)
		}
	}
	for _, f := range failures {
		t.Errorf("instance %d shard %s: Hooks.Failed (%v): %v", f.instance, f.shard, f.class, f.err)
	}
	for _, msg := range logs.all() {
		t.Errorf("logged: %s", msg)
	}
	for _, l := range all {
		l.mu.Lock()
		readErr, finished, subs, resubs := l.readErr, l.finished, l.subs, l.resubs
		l.mu.Unlock()
		if finished && !errors.Is(readErr, context.Canceled) {
			t.Errorf("shard %s: Read returned %v, want the test's cancellation", l.id, readErr)
		}
		if steady && (subs != 1 || resubs != 0) {
			t.Errorf("shard %s: %d subscriptions (%d resubscriptions), want exactly one", l.id, subs, resubs)
		}
	}

	// Every record, in order, once.
	for _, l := range all {
		stored, err := srv.ShardRecords(startupStream, l.id)
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		got := l.recs
		l.mu.Unlock()
		if len(got) > len(stored) {
			t.Errorf("shard %s: %d records delivered, the stream holds %d (duplicates)", l.id, len(got), len(stored))
			continue
		}
		for i, r := range got {
			if aws.ToString(r.SequenceNumber) != aws.ToString(stored[i].SequenceNumber) || string(r.Data) != string(stored[i].Data) {
				t.Errorf("shard %s: record %d is %s %q, want %s %q (out of order, duplicated or skipped)", l.id, i,
					aws.ToString(r.SequenceNumber), r.Data, aws.ToString(stored[i].SequenceNumber), stored[i].Data)
				break
			}
		}
		if len(got) < startupPreload {
			t.Errorf("shard %s: only %d of the %d preloaded records delivered", l.id, len(got), startupPreload)
		}
	}

	// Control-plane calls per strategy.
	if steady && res.calls["SubscribeToShard"] != startupShards {
		t.Errorf("%s: %d SubscribeToShard calls reached the fake, want exactly %d (one per shard)", strategy, res.calls["SubscribeToShard"], startupShards)
	}
	switch strategy {
	case "lazy":
		if n := res.calls["ListStreamConsumers"]; n != 0 {
			t.Errorf("lazy called ListStreamConsumers %d times, want never", n)
		}
		if n := res.calls["DeregisterStreamConsumer"]; n != 0 {
			t.Errorf("lazy called DeregisterStreamConsumer %d times, want never", n)
		}
		if res.registerOK != 1 {
			t.Errorf("lazy: %d successful registrations, want exactly 1", res.registerOK)
		}
		// The stream holds exactly one consumer: the race made no second one.
		// (Counted above already, so this call is not in the figures.)
		out, err := srv.NewClient().ListStreamConsumers(t.Context(), &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Consumers) != 1 || aws.ToString(out.Consumers[0].ConsumerName) != startupConsumer {
			t.Errorf("after the lazy race the stream has consumers %+v, want exactly %q", out.Consumers, startupConsumer)
		}
	case "eager":
		for _, op := range []string{"RegisterStreamConsumer", "ListStreamConsumers", "DeregisterStreamConsumer"} {
			if n := res.calls[op]; n != 0 {
				t.Errorf("eager called %s %d times, want never", op, n)
			}
		}
		if n := res.calls["DescribeStreamConsumer"]; n < startupInstances {
			t.Errorf("eager: %d DescribeStreamConsumer calls, want at least one per instance (%d)", n, startupInstances)
		}
	case "none":
		for _, op := range startupOps {
			if n := res.calls[op]; n != 0 {
				t.Errorf("none called %s %d times, want zero control-plane calls", op, n)
			}
		}
	}
	return res
}

// waitFor polls cond every 10ms until it holds (true) or ctx ends (false).
func waitFor(ctx context.Context, cond func() bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
}
