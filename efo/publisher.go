// Package efo reads Kinesis shards by Enhanced Fan-Out: a registered stream
// consumer subscribes to each shard (SubscribeToShard) and records are pushed
// over HTTP/2 with a dedicated 2 MiB/s per shard. It also registers,
// describes and deregisters stream consumers.
package efo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/logging"
	"github.com/benthos-kinesis/benthos-kinesis/internal/pace"
	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Options tune a Publisher. The zero value of each field means its default.
type Options struct {
	// SubscribeGap is the least time between two SubscribeToShard calls for
	// one shard. Default and AWS's limit: 1s.
	SubscribeGap time.Duration
	// Watchdog replaces a subscription that delivers nothing, not even an
	// empty event, for this long while the reader waits for it (time spent
	// waiting for the pipeline does not count), and gives up a subscribe call
	// that gets no answer for this long. Default 35s.
	Watchdog time.Duration
	// RetryLimit is how many consecutive retryable errors (throttling,
	// LimitExceeded, unknown errors) a shard tolerates before Read returns the
	// last one. Recoverable errors (connection resets, time-outs,
	// ResourceInUse during a hand-over, InternalFailure) never count.
	// Default 10.
	RetryLimit int
	// BackoffInitial and BackoffMax bound the jittered exponential wait after
	// a failure (on top of SubscribeGap). Defaults 1s and 10s.
	BackoffInitial, BackoffMax time.Duration
	// Logger receives subscription logs; default none.
	Logger logging.Logger
	// Hooks observe subscriptions, for metrics; each may be nil.
	Hooks Hooks
	// Reregister, when set, is called when a subscription as consumer stale
	// answered ResourceNotFound, which may mean that the consumer is gone
	// (deregistered while in use): it returns the ARN of the consumer to use
	// from then on, registering it again only if it is really gone (lazy
	// registration: RegisterAgain). An error wrapping ErrConsumerRegistered
	// says the consumer is still there, so the shard or the stream is what
	// was not found: that error ends the Read, as every other does. Nil:
	// every ResourceNotFound ends the Read.
	Reregister func(ctx context.Context, stale string) (string, error)
	// Windows, when set, sizes each subscription's HTTP/2 stream window
	// by the shards that read (see awsclient.StreamWindows): a shard joins
	// while its Read runs.
	Windows Windows
}

// Windows sizes subscriptions' flow-control windows; awsclient.StreamWindows
// is one.
type Windows interface {
	// Join counts a reading shard until leave is called.
	Join() (leave func())
	// Option makes a SubscribeToShard call with the window due now.
	Option(*kinesis.Options)
}

// Hooks are called from the shard's reading goroutine.
type Hooks struct {
	// Subscribed is called when a subscription opened; resubscribe is false
	// for the first subscription of a Read.
	Subscribed func(shardID string, resubscribe bool)
	// Failed is called for every failed subscription, with its class.
	Failed func(shardID string, class awserr.Class, err error)
}

func (o Options) withDefaults() Options {
	if o.SubscribeGap <= 0 {
		o.SubscribeGap = time.Second
	}
	if o.Watchdog <= 0 {
		o.Watchdog = 35 * time.Second
	}
	if o.RetryLimit <= 0 {
		o.RetryLimit = 10
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = logging.NopLogger{}
	}
	if o.Hooks.Subscribed == nil {
		o.Hooks.Subscribed = func(string, bool) {}
	}
	if o.Hooks.Failed == nil {
		o.Hooks.Failed = func(string, awserr.Class, error) {}
	}
	return o
}

// Publisher reads the shards of one stream through one registered consumer.
type Publisher struct {
	api  SubscribeAPI
	opts Options

	mu       sync.Mutex
	consumer string // the consumer ARN; replaced by Reregister
	// generation counts replacements of the consumer: a registration again
	// may give the same ARN (it ends in the creation time, in seconds).
	generation int
	reregister sync.Mutex // one re-registration at a time
	// pacer keeps subscribe calls for one shard SubscribeGap apart across
	// Reads: a restarted Read must not subscribe again at once.
	pacer *pace.Pacer
}

// New returns a Publisher that subscribes as the consumer with the given ARN.
func New(api SubscribeAPI, consumerARN string, opts Options) *Publisher {
	opts = opts.withDefaults()
	return &Publisher{api: api, consumer: consumerARN, opts: opts, pacer: pace.New(opts.SubscribeGap)}
}

// consumerARN returns the consumer ARN in use and its generation.
func (p *Publisher) consumerARN() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.consumer, p.generation
}

// replaceConsumer calls Reregister, one shard at a time, for a shard whose
// subscription as the consumer of generation stale answered ResourceNotFound,
// and returns the consumer ARN to use from then on. A shard that finds the
// consumer already replaced by another uses the new one.
func (p *Publisher) replaceConsumer(ctx context.Context, stale int) (string, error) {
	p.reregister.Lock()
	defer p.reregister.Unlock()
	arn, gen := p.consumerARN()
	if gen != stale {
		return arn, nil
	}
	arn, err := p.opts.Reregister(ctx, arn)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.consumer = arn
	p.generation++
	p.mu.Unlock()
	return arn, nil
}

// Read delivers the records of shardID from start, in order, until the shard
// ends (it then returns nil after a batch with End set), ctx ends, deliver
// fails, or an error that retrying will not heal. A subscription that ends
// (AWS ends each after 5 minutes) is renewed from where it stopped.
//
// room, when not nil, is the memory budget each event takes room from
// before it is decoded, as this shard's reader: the room of an average event
// of the shard so far, trued up to what its records cost (see shard.Room).
func (p *Publisher) Read(ctx context.Context, shardID string, start shard.Start, room shard.Room, deliver shard.Deliver) error {
	if err := start.Validate(); err != nil {
		arn, _ := p.consumerARN()
		return &Error{Consumer: arn, Shard: shardID, Class: awserr.Fatal, Err: err}
	}
	if p.opts.Windows != nil {
		leave := p.opts.Windows.Join()
		defer leave()
	}
	r := &reader{Publisher: p, shardID: shardID, pos: start, room: room}
	r.backoff = backoff.Backoff{Initial: p.opts.BackoffInitial, Max: p.opts.BackoffMax}
	r.inUseBackoff = backoff.Backoff{Initial: 500 * time.Millisecond, Max: 2 * time.Second}
	return r.run(ctx, deliver)
}

// reader is the state of one Read.
type reader struct {
	*Publisher
	shardID       string
	room          shard.Room  // nil: no budget
	consumer      string      // the consumer ARN of the last subscribe call
	generation    int         // and its generation
	pos           shard.Start // where the next subscription starts
	lastDelivered string      // sequence number of the last record delivered
	subscriptions int
	backoff       backoff.Backoff
	inUseBackoff  backoff.Backoff // short: a hand-over ends within 5 s
	failures      int             // consecutive retryable failures
	inUse         int             // consecutive ResourceInUse answers
	// costPerByte is what the shard's events cost of the budget (see
	// shard.Cost) per byte of message, as learned (see settle); sized is
	// the length of the message room was last taken for.
	costPerByte float64
	sized       int
}

// inUseWarnEvery: a hand-over takes a few seconds; this many refusals in a
// row mean something else holds the shard.
const inUseWarnEvery = 10

// deliverError is an error of the caller's deliver, which ends the Read
// with it as it is.
type deliverError struct{ err error }

func (e *deliverError) Error() string { return e.err.Error() }

// errSilent ends a subscription that the watchdog found silent;
// errUnanswered a subscribe call that got no answer within that period.
var (
	errSilent     = errors.New("subscription delivered nothing within the watchdog period")
	errUnanswered = errors.New("subscribe call got no answer within the watchdog period")
)

func (r *reader) run(ctx context.Context, deliver shard.Deliver) error {
	for {
		if err := r.pacer.Wait(ctx, r.shardID); err != nil {
			return err
		}
		ended, err := r.subscribe(ctx, deliver)
		if ended {
			r.pacer.Forget(r.shardID)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if de := (*deliverError)(nil); errors.As(err, &de) {
			return de.err // the caller's, not a subscription's failure
		}
		if err == nil {
			continue // the subscription ran its course: renew it at once
		}
		if stop := r.failed(ctx, err); stop != nil {
			return stop
		}
	}
}

// subscribe runs one subscription until it ends. It reports whether the
// shard ended, and the error that ended the subscription, if any.
func (r *reader) subscribe(ctx context.Context, deliver shard.Deliver) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A call that gets no answer (no response, no initial event) within the
	// watchdog period is given up: the connection may be alive while the
	// request is lost, and nothing else would end the wait.
	var hung atomic.Bool
	callTimer := time.AfterFunc(r.opts.Watchdog, func() {
		hung.Store(true)
		cancel()
	})
	r.consumer, r.generation = r.consumerARN()
	// Events are decoded when this loop waits for one, not two ahead in the
	// SDK's goroutines while the pipeline is busy.
	gate := sdkopt.NewEventGate()
	if r.room != nil {
		gate = sdkopt.NewSizingGate() // room is taken for each event once its size is known
	}
	defer gate.Close()
	callOpts := []func(*kinesis.Options){gate.Option, noSDKRetries}
	if r.opts.Windows != nil {
		callOpts = append(callOpts, r.opts.Windows.Option)
	}
	out, err := r.api.SubscribeToShard(sctx, &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String(r.consumer),
		ShardId:          aws.String(r.shardID),
		StartingPosition: startingPosition(r.pos),
	}, callOpts...)
	stopped := callTimer.Stop()
	// The gap to the next call counts from the answer: the service saw this
	// call no later than that, so the next one reaches it a full gap later.
	r.pacer.Done(r.shardID)
	if err != nil {
		if hung.Load() && ctx.Err() == nil {
			return false, errUnanswered
		}
		return false, err
	}
	if !stopped { // the timer fired just as the answer came: the stream is cancelled
		gate.Close()
		out.GetStream().Close()
		return false, errUnanswered
	}
	stream := out.GetStream()
	defer stream.Close()
	defer gate.Close() // before the stream's Close, which waits for its decoding goroutine
	r.opts.Hooks.Subscribed(r.shardID, r.subscriptions > 0)
	r.subscriptions++
	r.opts.Logger.Debugf("shard %s: subscribed from %v", r.shardID, r.pos)

	watchdog := time.NewTimer(r.opts.Watchdog)
	defer watchdog.Stop()
	for {
		var ev types.SubscribeToShardEventStream
		var ok bool
		var taken int64
		gate.Next()
	wait:
		for {
			select {
			case <-ctx.Done():
				r.giveBack(taken)
				return false, ctx.Err()
			case <-watchdog.C:
				r.giveBack(taken)
				return false, errSilent
			case n := <-gate.Sized():
				// A message of n bytes arrived: room for what it holds is
				// taken before it is decoded. Waiting for room is waiting
				// for the pipeline, not for the service.
				var err error
				if taken, err = r.take(ctx, n); err != nil {
					return false, err
				}
				watchdog.Reset(r.opts.Watchdog)
				gate.Decode()
			case ev, ok = <-stream.Events():
				break wait
			}
		}
		if !ok {
			r.giveBack(taken)
			return false, stream.Err()
		}
		e, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !isEvent {
			r.giveBack(taken)
			continue // an event type this SDK does not know: skip it
		}
		// A subscription that delivers events is healthy: failures before it
		// no longer count.
		r.failures = 0
		r.inUse = 0
		r.backoff.Reset()
		r.inUseBackoff.Reset()

		b, end := r.batch(&e.Value)
		b.Room = r.settle(taken, b.Records)
		if err := deliver(ctx, b); err != nil {
			return false, &deliverError{err}
		}
		if n := len(b.Records); n > 0 {
			// A copy: the sequence numbers of an event share one string,
			// which this one would keep whole while the shard waits.
			r.lastDelivered = strings.Clone(aws.ToString(b.Records[n-1].SequenceNumber))
		}
		if end {
			return true, nil
		}
		if c := aws.ToString(e.Value.ContinuationSequenceNumber); c != "" {
			r.pos = shard.Start{Kind: shard.AfterSequence, Sequence: c}
		} else if r.lastDelivered != "" {
			r.pos = shard.Start{Kind: shard.AfterSequence, Sequence: r.lastDelivered}
		}
		// Only time spent waiting on the service counts towards silence, not
		// time spent waiting for the pipeline to take the batch.
		watchdog.Reset(r.opts.Watchdog)
	}
}

// take takes room from the budget for a message of n bytes about to be
// decoded: what its records are expected to cost (shard.MessageCost, at
// what the shard's messages cost per byte so far).
func (r *reader) take(ctx context.Context, n int) (int64, error) {
	if r.room == nil {
		return 0, nil
	}
	if r.costPerByte <= 0 {
		r.costPerByte = shard.FirstCostPerByte
	}
	want := shard.MessageCost(int64(n), r.costPerByte)
	r.sized = n
	return r.room.Take(ctx, want, want)
}

// settle trues up the room taken for an event against what its records
// cost, and learns what the shard's messages cost per byte: the most of
// this one's and a quarter less than before, so that a run of events of
// one kind never takes the budget over.
func (r *reader) settle(taken int64, recs []types.Record) int64 {
	if r.room == nil {
		return 0
	}
	cost := shard.Settle(r.room, taken, shard.Cost(recs))
	if r.sized > 0 && len(recs) > 0 {
		r.costPerByte = max(float64(cost)/float64(r.sized), r.costPerByte*3/4)
	}
	return cost
}

// giveBack gives back room taken for an event that did not come.
func (r *reader) giveBack(taken int64) {
	if r.room != nil {
		r.room.Give(taken)
	}
}

// batch turns an event into a batch for the input. A shard has ended when an
// event carries no continuation sequence number (AWS then lists the children).
// Records at or before the last one delivered are dropped: a resubscription
// must never repeat a record.
func (r *reader) batch(ev *types.SubscribeToShardEvent) (shard.Batch, bool) {
	recs := ev.Records
	if r.lastDelivered != "" {
		i := 0
		for i < len(recs) && shard.CompareSequence(aws.ToString(recs[i].SequenceNumber), r.lastDelivered) <= 0 {
			i++
		}
		recs = recs[i:]
	}
	end := ev.ContinuationSequenceNumber == nil || (*ev.ContinuationSequenceNumber == "" && len(ev.ChildShards) > 0)
	b := shard.Batch{Records: recs, MillisBehindLatest: aws.ToInt64(ev.MillisBehindLatest), End: end}
	if end {
		b.ChildShards = ev.ChildShards
	}
	return b, end
}

// failed decides what to do after a failed subscription: it waits before the
// next one, or returns the error that ends the Read.
func (r *reader) failed(ctx context.Context, err error) error {
	d := awserr.Decide("SubscribeToShard", err)
	if errors.Is(err, errSilent) || errors.Is(err, errUnanswered) {
		d = awserr.Decision{Class: awserr.Recoverable}
	}
	r.opts.Hooks.Failed(r.shardID, d.Class, err)
	if awserr.Is(err, "ResourceNotFoundException") && r.opts.Reregister != nil && ctx.Err() == nil {
		// The consumer may be gone (deregistered while in use), or the shard
		// or the stream. Either way this is never the end of the shard.
		arn, rerr := r.replaceConsumer(ctx, r.generation)
		switch {
		case errors.Is(rerr, ErrConsumerRegistered):
			// Registering it again would change nothing, and subscribing
			// again at once would only get the same answer.
			return &Error{Consumer: r.consumer, Shard: r.shardID, Class: awserr.Fatal, Err: fmt.Errorf("%w; %w", err, ErrConsumerRegistered)}
		case rerr != nil:
			return &Error{Consumer: r.consumer, Shard: r.shardID, Class: awserr.Fatal, Err: fmt.Errorf("registering the consumer again after %v: %w", err, rerr)}
		}
		// Go on from where the last subscription stopped.
		r.opts.Logger.Warnf("shard %s: consumer %s is gone (%v): reading on through consumer %s", r.shardID, r.consumer, err, arn)
		return nil
	}
	switch {
	case d.Class == awserr.Canceled:
		return err
	case d.Class == awserr.Fatal:
		return &Error{Consumer: r.consumer, Shard: r.shardID, Class: d.Class, Err: err}
	case d.Counts:
		r.failures++
		if r.failures >= r.opts.RetryLimit {
			return &Error{Consumer: r.consumer, Shard: r.shardID, Class: d.Class,
				Err: fmt.Errorf("%d failures in a row, the last: %w", r.failures, err)}
		}
		r.opts.Logger.Warnf("shard %s: subscription failed (%d of %d tries): %v", r.shardID, r.failures, r.opts.RetryLimit, err)
	default:
		if awserr.Is(err, "ResourceInUseException") {
			r.inUse++
			if r.inUse%inUseWarnEvery == 0 {
				r.opts.Logger.Warnf("shard %s: %d subscriptions in a row refused as in use: is another process subscribed to this shard with consumer %s (another pipeline, or another lease group, with the same efo.consumer_name: a consumer serves one subscription per shard)?", r.shardID, r.inUse, r.consumer)
			} else {
				r.opts.Logger.Debugf("shard %s: subscription still held elsewhere (hand-over), retrying: %v", r.shardID, err)
			}
			// A hand-over ends within 5 s of the previous subscription: retry
			// soon (SubscribeGap still applies), not with the long backoff.
			return r.inUseBackoff.Wait(ctx)
		} else {
			r.opts.Logger.Infof("shard %s: subscription ended (%v), resubscribing from %v", r.shardID, err, r.pos)
		}
	}
	return r.backoff.Wait(ctx)
}

// noSDKRetries leaves retrying a subscription to the reader: SDK retries
// would come within milliseconds, against the limit of one subscribe call per
// second per shard, and would hide each failure from the error classes.
func noSDKRetries(o *kinesis.Options) {
	o.Retryer = aws.NopRetryer{}
}

func startingPosition(s shard.Start) *types.StartingPosition {
	p := &types.StartingPosition{Type: types.ShardIteratorType(s.Kind.String())}
	switch s.Kind {
	case shard.AtSequence, shard.AfterSequence:
		p.SequenceNumber = aws.String(s.Sequence)
	case shard.AtTimestamp:
		p.Timestamp = aws.Time(s.Timestamp)
	}
	return p
}
