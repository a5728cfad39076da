// Package polling reads Kinesis shards with GetShardIterator and GetRecords,
// the classic shared-throughput way: 5 calls/s and 2 MiB/s per shard, shared
// by every polling consumer of the stream.
package polling

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/logging"
	"github.com/benthos-kinesis/benthos-kinesis/internal/pace"
	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// MinInterval is the shortest gap between two GetRecords calls on one shard:
// Kinesis allows 5 per second per shard.
const MinInterval = 200 * time.Millisecond

// DefaultIdleInterval is the longest gap between two GetRecords calls on an
// idle shard by default: 512 idle shards then cost 256 calls a second
// instead of 2,560, and a record written after an idle spell is read
// within about 2 s.
const DefaultIdleInterval = 2 * time.Second

// Options tune a Publisher. The zero value of each field means its default.
type Options struct {
	// Interval is the gap between the starts of two GetRecords calls on one
	// shard. Default and minimum: MinInterval.
	Interval time.Duration
	// IdleInterval is the longest gap between two GetRecords calls on a
	// shard whose reads come back empty at its tip (no records, nothing
	// behind): the gap doubles from Interval with each such read, up to
	// IdleInterval, and is Interval again as soon as a read brings records
	// or finds the shard behind. Default 2s; at most Interval: never backs
	// off.
	IdleInterval time.Duration
	// Limit is the most records one GetRecords call returns. Default 10000,
	// the Kinesis maximum. A call asks for fewer when the records are large
	// enough that fewer make ReadBytes (see limit).
	Limit int32
	// RetryLimit is how many consecutive retryable errors (see awserr) a shard
	// reader tolerates before Read returns the last one. Default 10.
	// Recoverable errors and throttling never count.
	RetryLimit int
	// Backoff is the first and the largest wait after a failed call.
	// Defaults 200ms and 10s.
	BackoffInitial, BackoffMax time.Duration
	// CallTimeout bounds each GetShardIterator and GetRecords call, so that a
	// call on a connection that died silently fails and is retried. Default
	// 30s.
	CallTimeout time.Duration
	// Logger receives retry and error logs; default none.
	Logger logging.Logger
	// Throttled is called once per throttled call; default none.
	Throttled func(shardID string)
}

func (o Options) withDefaults() Options {
	if o.Interval < MinInterval {
		o.Interval = MinInterval
	}
	if o.IdleInterval == 0 {
		o.IdleInterval = DefaultIdleInterval
	}
	o.IdleInterval = max(o.IdleInterval, o.Interval)
	if o.Limit <= 0 || o.Limit > 10000 {
		o.Limit = 10000
	}
	if o.RetryLimit <= 0 {
		o.RetryLimit = 10
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = 200 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = logging.NopLogger{}
	}
	if o.Throttled == nil {
		o.Throttled = func(string) {}
	}
	return o
}

// Publisher reads the shards of one stream by polling.
type Publisher struct {
	api    API
	stream string
	opts   Options
	// pacer keeps GetRecords calls for one shard Interval apart across
	// Reads: a restarted Read must not call again at once.
	pacer *pace.Pacer
}

// New returns a Publisher for the stream with the given ARN.
func New(api API, streamARN string, opts Options) *Publisher {
	opts = opts.withDefaults()
	return &Publisher{api: api, stream: streamARN, opts: opts, pacer: pace.New(opts.Interval)}
}

// Read delivers the records of shardID from start, in order, until the shard
// ends (it then returns nil after a batch with End set), ctx ends, deliver
// fails, or an error that retrying will not heal.
//
// room, when not nil, is the memory budget each call takes room from first,
// as this shard's reader: a call asks for as many records as the room it
// got holds (at least one), and its batch holds what its records cost (see
// shard.Room).
func (p *Publisher) Read(ctx context.Context, shardID string, start shard.Start, room shard.Room, deliver shard.Deliver) error {
	if err := start.Validate(); err != nil {
		return p.fail(shardID, "GetShardIterator", err)
	}
	r := &reader{Publisher: p, shardID: shardID, start: start, room: room}
	r.backoff = backoff.Backoff{Initial: p.opts.BackoffInitial, Max: p.opts.BackoffMax}
	return r.run(ctx, deliver)
}

// reader is the state of one Read: where to get a fresh iterator from, and
// when the last GetRecords call started.
type reader struct {
	*Publisher
	shardID  string
	room     shard.Room // nil: no budget
	start    shard.Start
	lastSeq  string // last record delivered; a fresh iterator starts after it
	iterator string
	// iteratorAt is when the iterator was handed out: it expires 5 minutes
	// later.
	iteratorAt time.Time
	backoff    backoff.Backoff
	failures   int
	// est is what the shard's records and answers were like so far.
	est estimates
	// gap is the wait between the starts of this shard's calls: Interval,
	// doubled by each empty read at the tip up to IdleInterval.
	gap time.Duration
}

// estimates are what a reader learnt of its shard's records, to size its
// calls and the room it takes for them.
type estimates struct {
	// recordSize is the bytes of a record (data and partition key),
	// averaged over the reads so far; 0 before the first record.
	recordSize float64
	// recordCost is what a record costs of the budget (shard.Cost), the
	// most of the last read's average and the average so far; 0 before
	// the first record.
	recordCost int64
	// perByte is what records cost per byte of the answer that carried
	// them (see shard.MessageCost); 0 before the first record.
	perByte float64
	// body is the length of the last answer (BodyGate), -1 when unknown.
	body int64
}

// idle takes in a read's outcome and returns the gap between the start of
// the call that made it and the next call's: empty at the shard's tip
// (nothing read, nothing behind) doubles the gap, up to IdleInterval;
// anything else brings it back to Interval (which the pacer keeps).
func (r *reader) idle(records int, behind int64) time.Duration {
	switch {
	case records > 0 || behind > 0 || r.gap == 0:
		r.gap = r.opts.Interval
	default:
		r.gap = min(2*r.gap, r.opts.IdleInterval)
	}
	return r.gap
}

// ReadBytes is what a GetRecords call asks for, in record bytes: five calls
// a second of it are more than a shard's read quota (2 MiB/s), so asking for
// more would not read faster on AWS, only hold more in memory per shard
// (the decoded read, and its response while it is decoded).
const ReadBytes = 1 << 20

// assumedRecordSize stands for the record size before the first record.
const assumedRecordSize = 1 << 10

// costMargin is added to the expected cost of a record when room is taken
// for a call: records a little larger than the average (a longer partition
// key) then still fit the room taken.
const costMargin = 64

// limit is the records the next call asks for: Options.Limit, or fewer, so
// that about ReadBytes of records come back.
func (r *reader) limit() int32 {
	return int32(min(float64(r.opts.Limit), max(1, ReadBytes/r.size())))
}

// size is the expected bytes of a record: the average so far, or
// assumedRecordSize before the first.
func (r *reader) size() float64 {
	if r.est.recordSize <= 0 {
		return assumedRecordSize
	}
	return r.est.recordSize
}

// iteratorFresh is how old an iterator may be when a call is made with it:
// AWS lets one live 5 minutes.
const iteratorFresh = 4 * time.Minute

// take takes room for the next call from the budget, between one record's
// cost and the cost of limit() records, and returns it with the records
// the call may ask for to stay within it.
func (r *reader) take(ctx context.Context) (taken int64, limit int32, err error) {
	limit = r.limit()
	if r.room == nil {
		return 0, limit, nil
	}
	one := r.est.recordCost
	if one <= 0 {
		one = assumedRecordSize + shard.RecordOverhead + 64
	}
	one += costMargin
	taken, err = r.room.Take(ctx, one, one*int64(limit))
	if err != nil {
		return 0, 0, err
	}
	return taken, int32(max(1, min(int64(limit), taken/one))), nil
}

// giveBack gives back room taken for a call that brought nothing.
func (r *reader) giveBack(taken int64) {
	if r.room != nil {
		r.room.Give(taken)
	}
}

// observe updates the average record size with a read's records.
func (r *reader) observe(recs []types.Record) {
	if len(recs) == 0 {
		return
	}
	var bytes int
	for i := range recs {
		bytes += len(recs[i].Data) + len(aws.ToString(recs[i].PartitionKey))
	}
	size := float64(bytes) / float64(len(recs))
	if r.est.recordSize == 0 {
		r.est.recordSize = size
	} else {
		r.est.recordSize = (r.est.recordSize + size) / 2
	}
	total := shard.Cost(recs)
	cost := total / int64(len(recs))
	r.est.recordCost = max(cost, (r.est.recordCost+cost)/2)
	if r.est.body > 0 {
		// As the fan-out reader learns it: the most of this answer's and
		// a quarter less than before.
		r.est.perByte = max(float64(total)/float64(r.est.body), r.est.perByte*3/4)
	}
}

// bodyGate is the gate of a GetRecords answer (sdkopt.BodyGate): once its
// length n is known and before its body is read, the room its records are
// expected to cost is taken, if more than the room taken for the call,
// waiting for it if it must. A stream takes records of up to 10 MiB (since 2025):
// one of them comes in an answer of any Limit, and without the gate a
// shard would read it unannounced and force it on the budget, several
// shards at once. The call's time-out (call) is held while the gate waits
// for the pipeline, and starts again for the body.
func (r *reader) bodyGate(ctx context.Context, call *time.Timer, taken *int64) func(n int64) error {
	return func(n int64) error {
		r.est.body = n
		if r.room == nil {
			return nil
		}
		perByte := r.est.perByte
		if perByte <= 0 {
			perByte = shard.FirstCostPerByte
		}
		want := shard.MessageCost(n, perByte)
		if want <= *taken {
			return nil
		}
		if !call.Stop() {
			return errCallTimedOut // the time-out came first: the call ends
		}
		defer call.Reset(r.opts.CallTimeout)
		// All of it at once, the room taken for the call given back
		// first: a read that needs more than the whole budget gets it
		// once nothing else is in use, which this one's room would never
		// let happen.
		r.room.Give(*taken)
		var err error
		*taken, err = r.room.Take(ctx, want, want)
		return err
	}
}

func (r *reader) run(ctx context.Context, deliver shard.Deliver) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.iterator == "" {
			it, err := r.getIterator(ctx)
			if err != nil {
				if retryErr := r.retry(ctx, "GetShardIterator", err); retryErr != nil {
					return retryErr
				}
				continue
			}
			r.iterator, r.iteratorAt = it, time.Now()
		}
		if err := r.pacer.Wait(ctx, r.shardID); err != nil {
			return err
		}
		taken, limit, err := r.take(ctx)
		if err != nil {
			return err
		}
		if time.Since(r.iteratorAt) > iteratorFresh {
			// The wait for room outlasted the iterator: a fresh one, with
			// the room kept, rather than a call bound to fail that gives
			// the room and the shard's turn away.
			it, err := r.getIterator(ctx)
			if err != nil {
				r.giveBack(taken)
				if retryErr := r.retry(ctx, "GetShardIterator", err); retryErr != nil {
					return retryErr
				}
				continue
			}
			r.iterator, r.iteratorAt = it, time.Now()
		}
		r.pacer.Done(r.shardID)
		called := time.Now()
		r.est.body = -1
		out, err := r.getRecords(ctx, limit, &taken)
		if err != nil {
			r.giveBack(taken)
			if awserr.Is(err, "ExpiredIteratorException") {
				r.opts.Logger.Debugf("shard %s: iterator expired, getting a new one from %v", r.shardID, r.position())
				r.iterator = ""
				continue
			}
			if retryErr := r.retry(ctx, "GetRecords", err); retryErr != nil {
				return retryErr
			}
			continue
		}
		r.backoff.Reset()
		r.failures = 0
		r.observe(out.Records)

		b := shard.Batch{
			Records:            out.Records,
			MillisBehindLatest: aws.ToInt64(out.MillisBehindLatest),
			End:                out.NextShardIterator == nil,
			Room:               shard.Settle(r.room, taken, shard.Cost(out.Records)),
		}
		if b.End {
			b.ChildShards = out.ChildShards
		}
		if err := deliver(ctx, b); err != nil {
			return err
		}
		if n := len(out.Records); n > 0 {
			// A copy: the sequence numbers of a read share one string,
			// which this one would keep whole while the shard waits.
			r.lastSeq = strings.Clone(aws.ToString(out.Records[n-1].SequenceNumber))
		}
		if b.End {
			r.pacer.Forget(r.shardID)
			return nil
		}
		r.iterator, r.iteratorAt = aws.ToString(out.NextShardIterator), called
		if gap := r.idle(len(out.Records), b.MillisBehindLatest); gap > r.opts.Interval {
			if err := backoff.Sleep(ctx, time.Until(called.Add(gap))); err != nil {
				return err
			}
		}
	}
}

// position is where a fresh iterator must start: after the last record
// delivered, or at the original start when nothing was delivered yet.
func (r *reader) position() shard.Start {
	if r.lastSeq != "" {
		return shard.Start{Kind: shard.AfterSequence, Sequence: r.lastSeq}
	}
	return r.start
}

func (r *reader) getIterator(ctx context.Context) (string, error) {
	pos := r.position()
	in := &kinesis.GetShardIteratorInput{
		ShardId:           aws.String(r.shardID),
		StreamARN:         aws.String(r.stream),
		ShardIteratorType: types.ShardIteratorType(pos.Kind.String()),
	}
	switch pos.Kind {
	case shard.AtSequence, shard.AfterSequence:
		in.StartingSequenceNumber = aws.String(pos.Sequence)
	case shard.AtTimestamp:
		in.Timestamp = aws.Time(pos.Timestamp)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
	defer cancel()
	out, err := r.api.GetShardIterator(ctx, in, noSDKRetries)
	if err != nil {
		return "", err
	}
	if out.ShardIterator == nil {
		return "", &Error{Stream: r.stream, Shard: r.shardID, Op: "GetShardIterator", Err: errNoIterator}
	}
	return *out.ShardIterator, nil
}

// retry waits before the next attempt after err, or returns the error that
// ends the read.
func (r *reader) retry(ctx context.Context, op string, err error) error {
	d := awserr.Decide(op, err)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch d.Class {
	case awserr.Canceled:
		return err
	case awserr.Fatal:
		return r.fail(r.shardID, op, err)
	case awserr.Throttled:
		r.opts.Throttled(r.shardID)
	}
	switch {
	case awsclient.IsNoAnswer(err):
		// Not counted (the endpoint may come back), but said at a level
		// an operator sees: the error names the endpoint that went silent.
		r.opts.Logger.Warnf("shard %s: %s failed, retrying: %v", r.shardID, op, err)
	case !d.Counts:
		r.opts.Logger.Debugf("shard %s: %s failed (%v), backing off: %v", r.shardID, op, d.Class, err)
	default:
		r.failures++
		if r.failures >= r.opts.RetryLimit {
			return r.fail(r.shardID, op, err)
		}
		r.opts.Logger.Warnf("shard %s: %s failed (%d of %d tries), retrying: %v", r.shardID, op, r.failures, r.opts.RetryLimit, err)
	}
	return r.backoff.Wait(ctx)
}

// errCallTimedOut ends a GetRecords call that got no answer, or no body,
// within CallTimeout.
var errCallTimedOut = errors.New("no answer within the call's time-out")

// callTimeout is the error of a call that errCallTimedOut ended: a
// deadline the reader retries, not its context's end.
type callTimeout struct {
	after time.Duration
	err   error
}

func (e *callTimeout) Error() string {
	return fmt.Sprintf("GetRecords: no answer within %v: %v", e.after, e.err)
}

func (e *callTimeout) Unwrap() error { return context.DeadlineExceeded }

// getRecords makes one GetRecords call of limit records, within
// CallTimeout but for the time its gate waits for room (bodyGate), which
// adds what it takes to taken.
func (r *reader) getRecords(ctx context.Context, limit int32, taken *int64) (*kinesis.GetRecordsOutput, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	call := time.AfterFunc(r.opts.CallTimeout, func() { cancel(errCallTimedOut) })
	defer call.Stop()
	out, err := r.api.GetRecords(cctx, &kinesis.GetRecordsInput{
		ShardIterator: aws.String(r.iterator),
		Limit:         aws.Int32(limit),
		StreamARN:     aws.String(r.stream),
	}, noSDKRetries, sdkopt.BodyGate(r.bodyGate(ctx, call, taken)))
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errCallTimedOut) {
		err = &callTimeout{after: r.opts.CallTimeout, err: err}
	}
	return out, err
}

// noSDKRetries leaves retrying to the reader, which keeps the per-shard call
// rate (SDK retries come within milliseconds) and classifies every failure.
func noSDKRetries(o *kinesis.Options) {
	o.Retryer = aws.NopRetryer{}
}

func (p *Publisher) fail(shardID, op string, err error) error {
	return &Error{Stream: p.stream, Shard: shardID, Op: op, Err: err}
}
