// Package input is the aws_kinesis_streams Benthos input: its configuration,
// the component's lifecycle (Connect, ReadBatch, Close), the memory policy,
// replays of rejected batches, health, and the commands.
//
// Dependencies flow one way: the component (spec.go, config.go, input.go)
// builds one read.Env from the configuration and runs a read.Stream per
// stream (package read: discovery, shard readers, acknowledgements), which
// asks a coordinator (package coord) which shards it may read and tells it
// what was acknowledged; the coordinator keeps that in the stream's
// positions and stores it (input/checkpoint, or the lease table of package
// leasecoord on input/lease). coordination.go turns the configuration into
// one or the other; nothing else asks which one it has.
package input

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/read"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// stream is a stream the input reads: its reader, and what the component
// keeps of it for Close.
type stream struct {
	*read.Stream
	client *kinesis.Client
	// deregister is the consumer ARN to deregister at a clean close
	// (efo.deregister_on_close), or empty.
	deregister string
}

// kinesisInput implements service.BatchInput.
type kinesisInput struct {
	conf    config
	log     *service.Logger
	res     *service.Resources
	metrics *metrics

	// ctx lives from the first Connect until Close; every goroutine of the
	// input is counted in wg and ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	out     chan read.Delivery
	replays *replays // rejected batches to deliver again (auto_replay_nacks)
	// mem owns the memory rules: the budget of the records in flight, the
	// fan-out windows and the soft memory limit (memory.go).
	mem *memoryPlan

	// health says whether any stream can be read: /ready fails while none
	// can (health.go).
	health *inputHealth

	connMu    sync.Mutex
	connected bool
	coord     coord.Coordination // the checkpoint file or the lease table; set by Connect
	streams   []*stream
	// seenAt is when each stream (by name) was first seen, kept across
	// failed Connect attempts: start_from latest is pinned to it.
	seenAt map[string]time.Time

	// deregisterTimeout bounds each DeregisterStreamConsumer call of Close
	// (efo.deregister_on_close): Benthos closes with a context that never
	// ends, and an endpoint that takes the call and never answers must not
	// hold the shutdown. Set by newInput: 10s.
	deregisterTimeout time.Duration

	// efoTune, when set (by tests), adjusts the fan-out publisher's options:
	// shorter timers than AWS's pace needs.
	efoTune func(*efo.Options)
}

func newInput(pc *service.ParsedConfig, res *service.Resources) (*kinesisInput, error) {
	conf, err := parseConfig(pc)
	if err != nil {
		return nil, err
	}
	if err := conf.Coordination.check(conf); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &kinesisInput{
		conf:    conf,
		log:     res.Logger(),
		res:     res,
		metrics: newMetrics(res.Metrics()),
		ctx:     ctx,
		cancel:  cancel,
		out:     make(chan read.Delivery),
		health:  newInputHealth(),
		replays: newReplays(),

		deregisterTimeout: 10 * time.Second,
	}
	in.mem = newMemoryPlan(ctx, conf, in.log, in.metrics)
	return in, nil
}

// Connect checks that every stream exists, opens the checkpoint store or
// lease table and starts reading. Errors name the stream, the endpoint and
// what to do; Benthos retries Connect with backoff.
func (in *kinesisInput) Connect(ctx context.Context) error {
	in.connMu.Lock()
	defer in.connMu.Unlock()
	if in.connected {
		// Again after ReadBatch said the input is not connected: no
		// stream can be read (see health.go).
		return in.awaitReadable(ctx)
	}
	if in.ctx.Err() != nil {
		return service.ErrEndOfInput
	}
	cfg, err := awsclient.Load(ctx, in.conf.settings())
	if errors.Is(err, awsclient.ErrNoRegion) {
		return fmt.Errorf("field %s: %w, and no stream ARN names one: set region, e.g. us-east-1", fRegion, err)
	}
	if err != nil {
		return err
	}
	counted := awsclient.OnError(in.metrics.apiError)
	client := awsclient.Kinesis(cfg, in.conf.Endpoint, counted)
	if in.coord == nil {
		c, err := in.conf.Coordination.open(ctx, in.conf, cfg, in.log, counted)
		if err != nil {
			return err
		}
		in.coord = c
	}

	env := in.readEnv()
	var streams []*stream
	for _, ref := range in.conf.Streams {
		s, err := in.prepareStream(ctx, env, client, ref, in.where(cfg))
		if err != nil {
			return err
		}
		streams = append(streams, s)
	}

	for _, s := range streams {
		if err := s.Load(ctx); err != nil {
			return err
		}
	}

	in.streams = streams
	in.connected = true
	for _, s := range streams {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			s.Run(in.ctx)
		}()
	}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		in.commitLoop(in.ctx)
	}()
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		in.watchHealth(in.ctx, streams)
	}()
	return nil
}

// readEnv is what the input's readers share, from its configuration; once
// the coordination is open.
func (in *kinesisInput) readEnv() *read.Env {
	start := read.Start{Name: in.conf.StartFrom, Latest: in.conf.StartFrom == startLatest}
	if in.conf.StartFrom == startAtTimestamp {
		start.At = in.conf.StartTimestamp
	}
	return &read.Env{
		Log:       in.log,
		Metrics:   in.metrics.read,
		Out:       in.out,
		Budget:    in.mem.budget,
		Batching:  in.conf.Batching,
		Resources: in.res,
		Limits: read.Limits{
			Checkpoint:  in.conf.CheckpointLimit,
			StrictOrder: in.conf.StrictOrder,
			ReplayNacks: in.conf.ReplayNacks,
			Deaggregate: in.conf.Deaggregate,
			Discovery:   in.conf.DiscoveryInterval,
			// DescribeStreamSummary allows 20 calls a second per
			// account, shared by every instance and stream.
			Placement: max(time.Minute, in.conf.DiscoveryInterval),
		},
		Start: start,
		Coord: in.coord,
		Store: readStore(in.conf),
	}
}

// where describes the Kinesis endpoint for error messages.
func (in *kinesisInput) where(cfg aws.Config) string {
	if in.conf.Endpoint != "" {
		return fmt.Sprintf("region %s at endpoint %s", cfg.Region, awsclient.RedactURL(in.conf.Endpoint))
	}
	return "region " + cfg.Region
}

// prepareStream finds the stream (and with fan-out, its consumer) and sets
// up its reader, as the configured reader does it (readers.go).
func (in *kinesisInput) prepareStream(ctx context.Context, env *read.Env, client *kinesis.Client, ref streamRef, where string) (*stream, error) {
	s := &stream{client: client}
	c := read.StreamConfig{Name: ref.Name, Client: client, FirstSeen: time.Now()}
	if err := in.conf.Reader.open(ctx, in, s, ref, &c, where); err != nil {
		return nil, err
	}
	s.Stream = read.NewStream(env, c)
	return s, nil
}

// dropClaim removes the claim on the registration of a stream's consumer
// from the lease table, if any: the consumer is registered.
func (in *kinesisInput) dropClaim(ctx context.Context, streamARN, name string) {
	if err := in.coord.DropRegistration(ctx, streamARN, in.conf.EFO.ConsumerName); err != nil {
		in.log.Warnf("stream %s: %v", name, err)
	}
}

// firstSeen returns when the stream was first seen: at, unless an earlier
// Connect attempt saw it first.
func (in *kinesisInput) firstSeen(name string, at time.Time) time.Time {
	if in.seenAt == nil {
		in.seenAt = map[string]time.Time{}
	}
	if first, ok := in.seenAt[name]; ok {
		return first
	}
	in.seenAt[name] = at
	return at
}

// efoPublisher returns the fan-out publisher of a stream. With reregister
// (lazy registration) a consumer deleted while in use is registered again.
func (in *kinesisInput) efoPublisher(client *kinesis.Client, consumerARN, streamName string, reregister func(context.Context, string) (string, error)) read.Publisher {
	o := efo.Options{
		Logger:     in.log,
		Reregister: reregister,
		Windows:    in.mem.efoWindows(),
		Hooks: efo.Hooks{
			Subscribed: func(shardID string, resubscribe bool) {
				if resubscribe {
					in.metrics.resubscribes.Incr(1, streamName, shardID)
				} else {
					in.metrics.subscriptions.Incr(1, streamName, shardID)
				}
			},
			Failed: func(shardID string, class awserr.Class, err error) {
				in.metrics.subscribeErrs.Incr(1, streamName, shardID, class.String())
			},
		},
	}
	if in.efoTune != nil {
		in.efoTune(&o)
	}
	return efo.New(client, consumerARN, o)
}

// ReadBatch returns the next batch of any shard.
//
// With auto_replay_nacks on, a batch the pipeline rejects comes again (once
// its pause is over, before newer batches), narrowed to the messages that
// failed when the error names them, and its shard's checkpoint stays before
// it until it is acknowledged.
func (in *kinesisInput) ReadBatch(ctx context.Context) (service.MessageBatch, service.AckFunc, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if in.ctx.Err() != nil {
			return nil, nil, service.ErrEndOfInput
		}
		r, wait := in.replays.next(time.Now())
		if r != nil {
			return in.hand(r)
		}
		var due <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			due = timer.C
		}
		// Counted while the pipeline waits for records (see memoryPlan.pulling).
		in.mem.pulling.Add(1)
		var d read.Delivery
		var got bool
		var stop error
		select {
		case d = <-in.out:
			got = true
		case <-due:
		case <-in.replays.added:
		case <-in.health.down:
			if in.health.reason() != "" {
				in.mem.pulling.Add(-1)
				return nil, nil, service.ErrNotConnected
			}
		case <-ctx.Done():
			stop = ctx.Err()
		case <-in.ctx.Done():
			stop = service.ErrEndOfInput
		}
		in.mem.pulling.Add(-1)
		switch {
		case stop != nil:
			return nil, nil, stop
		case !got:
			continue
		case d.Lapsed(time.Now()):
			d.Withdraw()
			continue
		case !in.conf.ReplayNacks:
			return d.Batch(), func(_ context.Context, err error) error { d.Ack(err); return nil }, nil
		}
		return in.hand(&replay{batch: d.Batch(), ack: d.Ack})
	}
}

// Close stops every reader and commits what has been acknowledged. Benthos
// calls it after waiting for pending acknowledgements.
func (in *kinesisInput) Close(ctx context.Context) error {
	in.cancel()
	defer in.mem.close()
	done := make(chan struct{})
	go func() {
		in.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	in.connMu.Lock()
	defer in.connMu.Unlock()
	errs := in.closeStreams()
	if in.coord != nil { // nil when Connect never succeeded
		errs = append(errs, in.coord.Close())
		in.coord = nil
	}
	for _, s := range in.streams {
		if s.deregister == "" {
			continue
		}
		if err := in.deregister(ctx, s); err != nil {
			errs = append(errs, err)
		} else {
			in.log.Infof("stream %s: deregistered consumer %s (deregister_on_close)", s.Name(), s.deregister)
		}
	}
	return errors.Join(errs...)
}

// closeStreams commits every stream's checkpoints and then, with a lease
// table, releases every stream's leases: all streams at once, so that no
// stream's leases lapse while another's are written. With a lease table each
// step is bounded by a lease period: a table that does not answer must not
// hold the shutdown (unreleased leases expire a lease period later).
func (in *kinesisInput) closeStreams() []error {
	var mu sync.Mutex
	var errs []error
	each := func(do func(s *stream) error) {
		var wg sync.WaitGroup
		for _, s := range in.streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := do(s); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	bounded := func(do func(context.Context) error) error {
		ctx, cancel := in.coord.Bound(context.Background())
		defer cancel()
		return do(ctx)
	}
	each(func(s *stream) error { return bounded(s.Commit) })
	each(func(s *stream) error { return bounded(s.Release) })
	return errs
}

// deregister deregisters the consumer of a stream (deregister_on_close),
// giving up after deregisterTimeout.
func (in *kinesisInput) deregister(ctx context.Context, s *stream) error {
	dctx, cancel := context.WithTimeout(ctx, in.deregisterTimeout)
	defer cancel()
	err := efo.Deregister(dctx, s.client, s.deregister)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && dctx.Err() != nil {
		err = fmt.Errorf("no answer within %v: %w", in.deregisterTimeout, err)
	}
	return fmt.Errorf("stream %s: deregister_on_close: consumer %s may still be registered; remove it with `benthos-kinesis efo deregister --stream %s --consumer-name %s`: %w",
		s.Name(), s.deregister, s.ARN(), in.conf.EFO.ConsumerName, err)
}

// commitLoop commits acknowledged positions every commit period (with a
// lease table, at least every sixth of a lease period: the commit renews
// and fences the leases).
func (in *kinesisInput) commitLoop(ctx context.Context) {
	t := time.NewTicker(in.coord.CommitEvery(in.conf.CommitPeriod))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, s := range in.streams {
			wg.Add(1)
			go func() { // streams commit side by side: one slow table write holds no other stream
				defer wg.Done()
				err := s.Commit(ctx)
				if ctx.Err() != nil {
					return
				}
				s.Committed(time.Now(), err)
				if err != nil {
					in.log.Errorf("%v", err)
				}
			}()
		}
		wg.Wait()
	}
}
