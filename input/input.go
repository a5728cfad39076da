// Package input is the aws_kinesis_streams Benthos input: configuration, shard
// discovery, one reader per shard, acknowledgement tracking and checkpoints.
// It owns all policy; the record publishers (polling, efo) only read.
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
	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// delivery is one Benthos batch on its way from a shard reader to ReadBatch;
// ack resolves it (nil error: acknowledged).
type delivery struct {
	batch service.MessageBatch
	ack   func(error)
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

	out     chan delivery
	replays *replays // rejected batches to deliver again (auto_replay_nacks)

	connMu    sync.Mutex
	connected bool
	store     checkpoint.Store
	table     *lease.Table // checkpoint.dynamodb, instead of store
	streams   []*streamReader
	// seen is when each stream (by name) was first seen, kept across
	// failed Connect attempts: start_from latest is pinned to it.
	seen map[string]time.Time

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
	if conf.Leases == nil {
		// A directory that can never serve stops the binary at start with
		// its message, rather than Connect retrying it for ever.
		if err := checkpoint.CheckDir(conf.CheckpointDir); err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
		}
		var streams []string
		for _, ref := range conf.Streams {
			streams = append(streams, ref.String())
		}
		if err := checkpoint.CheckLocks(conf.CheckpointDir, streams); err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
		}
	} else if err := checkTable(conf); err != nil {
		return nil, fmt.Errorf("field %s.%s.%s: %w", fCheckpoint, fDynamo, fDynamoTable, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &kinesisInput{
		conf:    conf,
		log:     res.Logger(),
		res:     res,
		metrics: newMetrics(res.Metrics()),
		ctx:     ctx,
		cancel:  cancel,
		out:     make(chan delivery),
		replays: newReplays(),

		deregisterTimeout: 10 * time.Second,
	}, nil
}

// Connect checks that every stream exists, opens the checkpoint store and
// starts reading. Errors name the stream, the endpoint and what to do; Benthos
// retries Connect with backoff.
// checkTable stops the binary at start when the lease table cannot serve
// whatever happens next (access denied, missing with create off, another
// kind of table), rather than Connect retrying it for ever. What it cannot
// tell within a few seconds is left to Connect.
func checkTable(conf config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, err := awsclient.Load(ctx, conf.settings())
	if err != nil {
		return nil // Connect says why, and retries
	}
	l := conf.Leases
	return lease.Check(ctx, awsclient.DynamoDB(cfg, l.Endpoint), l.Table, l.Create)
}

func (in *kinesisInput) Connect(ctx context.Context) error {
	in.connMu.Lock()
	defer in.connMu.Unlock()
	if in.connected {
		return nil
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
	client := awsclient.Kinesis(cfg, in.conf.Endpoint)
	if l := in.conf.Leases; l != nil && in.table == nil {
		t, err := lease.Open(ctx, awsclient.DynamoDB(cfg, l.Endpoint), l.Table, l.Create)
		if err != nil {
			return fmt.Errorf("field %s.%s.%s: %w", fCheckpoint, fDynamo, fDynamoTable, err)
		}
		in.table = t
		in.log.Infof("sharing shards through the lease table %s as instance %s (lease_period %v)", l.Table, l.InstanceID, l.LeasePeriod)
	}

	var streams []*streamReader
	for _, ref := range in.conf.Streams {
		s, err := in.prepareStream(ctx, client, ref, in.where(cfg))
		if err != nil {
			return err
		}
		streams = append(streams, s)
	}

	if in.store == nil && in.table == nil {
		store, err := checkpoint.OpenFile(in.conf.CheckpointDir)
		if err != nil {
			return fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
		}
		in.store = store
	}
	for _, s := range streams {
		if err := s.load(ctx); err != nil {
			return err
		}
	}

	in.streams = streams
	in.connected = true
	for _, s := range streams {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			s.run(in.ctx)
		}()
	}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		in.commitLoop(in.ctx)
	}()
	return nil
}

// where describes the Kinesis endpoint for error messages.
func (in *kinesisInput) where(cfg aws.Config) string {
	if in.conf.Endpoint != "" {
		return fmt.Sprintf("region %s at endpoint %s", cfg.Region, in.conf.Endpoint)
	}
	return "region " + cfg.Region
}

// prepareStream finds the stream (and with fan-out, its consumer) and sets up
// its reader. With registration none it makes no call at all: the consumer ARN
// names the stream.
func (in *kinesisInput) prepareStream(ctx context.Context, client *kinesis.Client, ref streamRef, where string) (*streamReader, error) {
	s := &streamReader{in: in, name: ref.Name, client: client}
	at := time.Now()
	if in.conf.Reader == readerEFO && in.conf.EFO.Registration == registrationNone {
		c := in.conf.EFO.ConsumerARNs[ref.Name]
		s.arn = c.StreamARN
		s.seen = in.firstSeen(ref.Name, at)
		s.pub = in.efoPublisher(client, c.ARN, ref.Name, nil)
		return s, nil
	}
	s.describe = func(ctx context.Context) (awsclient.Stream, error) {
		return awsclient.DescribeStream(ctx, client, ref, where, "field "+fStreams)
	}
	desc, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	s.arn, s.created = desc.ARN, desc.Created
	s.seen = in.firstSeen(ref.Name, at)
	if in.conf.Reader == readerPolling {
		s.pub = polling.New(client, s.arn, polling.Options{
			Interval: in.conf.PollingInterval,
			Limit:    in.conf.PollingLimit,
			Logger:   in.log,
			Throttled: func(shardID string) {
				in.metrics.throttles.Incr(1, ref.Name, shardID)
			},
		})
		return s, nil
	}
	wait := efo.WaitOptions{Logger: in.log}
	var consumer efo.Consumer
	if in.table != nil {
		// Instances on one lease table register the consumer once: the one
		// that claims the registration in the table; the claim is dropped
		// once the consumer is there, whoever registered it.
		wait.Claim = func(ctx context.Context) (bool, error) {
			return in.table.ClaimRegistration(ctx, s.arn, in.conf.EFO.ConsumerName, in.conf.Leases.InstanceID)
		}
	}
	if in.conf.EFO.Registration == registrationLazy {
		consumer, err = efo.Register(ctx, client, s.arn, in.conf.EFO.ConsumerName, wait)
		if err == nil {
			in.dropClaim(ctx, s, ref.Name)
		}
	} else {
		consumer, err = efo.Describe(ctx, client, s.arn, in.conf.EFO.ConsumerName, wait)
	}
	if err != nil {
		return nil, err
	}
	in.log.Infof("stream %s: reading through consumer %s", ref.Name, consumer.ARN)
	if in.conf.EFO.DeregisterOnClose {
		s.deregister = consumer.ARN
	}
	var reregister func(context.Context, string) (string, error)
	if in.conf.EFO.Registration == registrationLazy {
		reregister = func(ctx context.Context, stale string) (string, error) {
			c, err := efo.RegisterAgain(ctx, client, s.arn, in.conf.EFO.ConsumerName, stale, wait)
			if err == nil {
				in.dropClaim(ctx, s, ref.Name)
			}
			if err == nil && in.conf.EFO.DeregisterOnClose {
				in.connMu.Lock()
				s.deregister = c.ARN
				in.connMu.Unlock()
			}
			return c.ARN, err
		}
	}
	s.pub = in.efoPublisher(client, consumer.ARN, ref.Name, reregister)
	return s, nil
}

// dropClaim removes the claim on the registration of a stream's consumer
// from the lease table, if any: the consumer is registered.
func (in *kinesisInput) dropClaim(ctx context.Context, s *streamReader, name string) {
	if in.table == nil {
		return
	}
	if err := in.table.DropRegistration(ctx, s.arn, in.conf.EFO.ConsumerName); err != nil {
		in.log.Warnf("stream %s: %v", name, err)
	}
}

// firstSeen returns when the stream was first seen: at, unless an earlier
// Connect attempt saw it first.
func (in *kinesisInput) firstSeen(name string, at time.Time) time.Time {
	if in.seen == nil {
		in.seen = map[string]time.Time{}
	}
	if first, ok := in.seen[name]; ok {
		return first
	}
	in.seen[name] = at
	return at
}

// efoPublisher returns the fan-out publisher of a stream. With reregister
// (lazy registration) a consumer deleted while in use is registered again.
func (in *kinesisInput) efoPublisher(client *kinesis.Client, consumerARN, streamName string, reregister func(context.Context, string) (string, error)) recordPublisher {
	o := efo.Options{
		Logger:     in.log,
		Reregister: reregister,
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
		select {
		case d := <-in.out:
			if !in.conf.ReplayNacks {
				return d.batch, func(_ context.Context, err error) error { d.ack(err); return nil }, nil
			}
			return in.hand(&replay{batch: d.batch, ack: d.ack})
		case <-due:
		case <-in.replays.added:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-in.ctx.Done():
			return nil, nil, service.ErrEndOfInput
		}
	}
}

// Close stops every reader and commits what has been acknowledged. Benthos
// calls it after waiting for pending acknowledgements.
func (in *kinesisInput) Close(ctx context.Context) error {
	in.cancel()
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
	if in.store != nil {
		errs = append(errs, in.store.Close())
		in.store = nil
	}
	for _, s := range in.streams {
		if s.deregister == "" {
			continue
		}
		if err := in.deregister(ctx, s); err != nil {
			errs = append(errs, err)
		} else {
			in.log.Infof("stream %s: deregistered consumer %s (deregister_on_close)", s.name, s.deregister)
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
	each := func(do func(s *streamReader) error) {
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
	bounded := func(s *streamReader, do func(context.Context) error) error {
		ctx := context.Background()
		if l := s.pos.leases; l != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, l.period)
			defer cancel()
		}
		return do(ctx)
	}
	each(func(s *streamReader) error { return bounded(s, s.pos.commit) })
	each(func(s *streamReader) error {
		if s.pos.leases == nil {
			return nil
		}
		return bounded(s, s.pos.releaseAll)
	})
	return errs
}

// deregister deregisters the consumer of a stream (deregister_on_close),
// giving up after deregisterTimeout.
func (in *kinesisInput) deregister(ctx context.Context, s *streamReader) error {
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
		s.name, s.deregister, s.arn, in.conf.EFO.ConsumerName, err)
}

// commitLoop commits acknowledged positions every commit period.
//
// With a lease table it also renews the leases held (ticking at least every
// sixth of a lease period, so that each is written at least every half
// period), and stops the readers of leases it could not renew for a whole
// lease period: another instance may hold them by now.
func (in *kinesisInput) commitLoop(ctx context.Context) {
	every := in.conf.CommitPeriod
	if l := in.conf.Leases; l != nil {
		every = min(every, l.LeasePeriod/6)
	}
	t := time.NewTicker(every)
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
				in.commitStream(ctx, s)
			}()
		}
		wg.Wait()
	}
}

// commitStream is one commit of a stream (see commitLoop).
func (in *kinesisInput) commitStream(ctx context.Context, s *streamReader) {
	l := s.pos.leases
	if l != nil {
		for _, id := range l.fence(time.Now()) {
			in.log.Warnf("stream %s shard %s: its lease could not be renewed for %v: stopped reading it until a renewal succeeds", s.name, id, l.period)
		}
	}
	if err := s.pos.commit(ctx); err != nil && ctx.Err() == nil {
		in.log.Errorf("%v", err)
	}
	if l != nil {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}
