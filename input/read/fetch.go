package read

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// fetcher is the publisher goroutine of a shard reader: it runs the
// publisher, retrying a failed read from after the last record it
// delivered, until the shard ends or ctx ends, and hands the reads to the
// reader's loop one at a time.
//
// A start at or after a sequence number is first checked against the
// shard's range (see position.go): one outside it stops the shard. One that
// Kinesis refuses as an invalid argument is replaced by a read from
// TRIM_HORIZON that drops what the start would not have read (see
// trimFallback), as long as that read shows the start's record trimmed; if
// it shows the record still there, the shard stops and the start is tried
// again now and then.
type fetcher struct {
	r   *shardReader
	out chan<- shard.Batch
	// start is where the next read starts: the reader's start, then after
	// the last record delivered.
	start shard.Start
	// last is the sequence number of the last record the current read
	// delivered; "" while it delivered none.
	last string

	// The fetcher's states; each holds while its field is set:
	//   - fallback: start was refused; reads are from TRIM_HORIZON, dropping
	//     what start would not have read, until one delivers a record.
	//   - refused: start was refused with its record still there; it is
	//     tried again after refusedBo, until a read delivers a record.
	//   - stopped: the shard's kinesis_shard_stopped gauge is set, until a
	//     read delivers.
	//   - verify: the last failure may mean the stream was deleted and
	//     created again: the shard is checked before the next read.
	fallback        *trimFallback
	refused         bool
	stopped, verify bool

	bo, refusedBo backoff.Backoff
}

// publish fetches the shard's reads from start into out until the shard
// ends or ctx ends (see fetcher).
func (r *shardReader) publish(ctx context.Context, start shard.Start, out chan<- shard.Batch) {
	f := &fetcher{
		r: r, out: out, start: start,
		bo:        backoff.Backoff{Initial: time.Second, Max: 2 * time.Minute},
		refusedBo: backoff.Backoff{Initial: positionRetryFirst, Max: positionRetry},
	}
	f.run(ctx)
}

func (f *fetcher) run(ctx context.Context) {
	r := f.r
	if err := outOfRange(f.start, r.info); err != nil {
		r.stopOnPosition(ctx, f.start, err)
		return
	}
	defer func() {
		if f.stopped { // this reader no longer stands for the shard
			r.setStopped(false)
		}
	}()
	for {
		if f.verify {
			goOn, again := f.checkSame(ctx)
			if !goOn {
				return
			}
			if again {
				continue
			}
		}
		f.last = ""
		from := f.start
		if f.fallback != nil {
			from = shard.Start{Kind: shard.TrimHorizon}
		}
		// The publisher takes room from the budget as this reader's member.
		err := r.s.conf.Publisher.Read(ctx, r.info.id, from, r.mem.room(), f.deliver)
		if f.last != "" {
			f.start = shard.Start{Kind: shard.AfterSequence, Sequence: f.last}
			f.fallback, f.refused = nil, false
			f.bo.Reset() // the read made progress: a later failure starts the backoff afresh
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		if !f.failed(ctx, err) {
			return
		}
	}
}

// checkSame checks, in state verify, that the shard listed is still the
// one read: goOn false when the reader must stop, again when the check is
// to be made again (after a pause).
func (f *fetcher) checkSame(ctx context.Context) (goOn, again bool) {
	if _, err := f.r.sameShard(ctx, f.start); err != nil {
		if errors.Is(err, errRecreated) {
			f.r.awaitReset(ctx, err)
			return false, false
		}
		wait := f.bo.Next()
		f.r.log.Errorf("%v; checking again in %v", err, wait.Round(time.Millisecond))
		return backoff.Sleep(ctx, wait) == nil, true
	}
	f.verify = false
	return true, false
}

// deliver takes a read of the publisher: it checks it, counts the shard's
// load, drops what a fallback read must not deliver, confirms a shard's
// end, and hands it to the reader's loop. The read's room is the reader's
// from here: given back unless the read reaches the loop.
func (f *fetcher) deliver(dctx context.Context, b shard.Batch) error {
	r := f.r
	if err := checkSequences(b.Records); err != nil {
		r.mem.ledger.give(b.Room)
		return err
	}
	f.countLoad(b)
	if f.fallback != nil {
		var expired bool
		all := len(b.Records)
		if b.Records, expired = f.fallback.filter(b.Records); expired {
			r.checkpointExpired(f.fallback.from)
		} else if f.fallback.present {
			r.mem.ledger.give(b.Room)
			return errPositionRefused
		}
		if all > 0 && len(b.Records) < all {
			kept := b.Room * int64(len(b.Records)) / int64(all)
			r.mem.ledger.give(b.Room - kept)
			b.Room = kept
		}
	}
	if f.stopped {
		f.stopped = false
		r.setStopped(false)
	}
	var endErr error
	if b.End {
		if endErr = r.confirmEnd(dctx, b); endErr != nil {
			// Its records are delivered; the end is not.
			b.End, b.ChildShards = false, nil
		}
	}
	select {
	case f.out <- b:
	case <-dctx.Done():
		r.mem.ledger.give(b.Room)
		return dctx.Err()
	}
	if n := len(b.Records); n > 0 {
		// A copy: kept while the shard waits, it would keep the read's
		// strings whole.
		f.last = strings.Clone(aws.ToString(b.Records[n-1].SequenceNumber))
	}
	if b.End || endErr != nil {
		return endErr
	}
	// Fetch the next read once the reader is on this one's last part (see
	// readPipe.ready).
	select {
	case <-r.reads.ready:
		return nil
	case <-dctx.Done():
		return dctx.Err()
	}
}

// countLoad tells the grant the shard's load: the records' bytes, at their
// arrival; a read at the tip that finds nothing tells that nothing arrived
// until now.
func (f *fetcher) countLoad(b shard.Batch) {
	if len(b.Records) == 0 && b.MillisBehindLatest != 0 {
		return
	}
	bytes, arrived := 0, time.Time{}
	for i := range b.Records {
		bytes += len(b.Records[i].Data)
		if at := b.Records[i].ApproximateArrivalTimestamp; at != nil && at.After(arrived) {
			arrived = *at
		}
	}
	f.r.g.Read(bytes, arrived)
}

// failed decides, after a read failed with err, what comes next, and
// waits before it: goOn false when the reader must stop.
func (f *fetcher) failed(ctx context.Context, err error) (goOn bool) {
	r := f.r
	switch {
	case errors.Is(err, errPositionRefused):
		f.fallback, f.refused, f.stopped = nil, true, true
		wait := f.refusedBo.Next()
		r.positionRefused(f.start, err, wait)
		return backoff.Sleep(ctx, wait) == nil
	case errors.Is(err, errEndUnconfirmed):
		wait := f.bo.Next()
		r.log.Warnf("%v; the end is not taken, and the shard is read again from %v in %v (metric kinesis_shard_ends_unconfirmed)", err, f.start, wait.Round(time.Millisecond))
		return backoff.Sleep(ctx, wait) == nil
	}
	if awserr.Is(err, "ResourceNotFoundException") || awserr.Is(err, "InvalidArgumentException") {
		reported, now, ok := f.refusal(ctx, err)
		if !ok || now {
			return ok
		}
		err = reported
	}
	wait := f.bo.Next()
	next := f.start.String()
	if f.fallback != nil {
		next = "TRIM_HORIZON, skipping every record up to " + next + ","
	}
	r.log.Errorf("%v; reading again from %s in %v", err, next, wait.Round(time.Millisecond))
	return backoff.Sleep(ctx, wait) == nil
}

// refusal handles a read the service refused (the stream or shard not
// found, or the start an invalid argument). The stream may have been
// deleted, and created again under its name: a read of the new one under
// this reader (whose state is the old stream's) would deliver what the new
// stream's own readers deliver again. Reading goes on only once the shard
// listed is known to be this one; discovery resets the stream otherwise. A
// refused sequence start of this shard within its range falls back to
// TRIM_HORIZON, at once (now). It returns err as it is to be reported.
func (f *fetcher) refusal(ctx context.Context, err error) (_ error, now, goOn bool) {
	r := f.r
	listed, serr := r.sameShard(ctx, f.start)
	switch {
	case serr != nil:
		err = fmt.Errorf("%w; the shard is not read again until it is known to be the same: %v", err, serr)
		if errors.Is(serr, errRecreated) {
			r.awaitReset(ctx, err)
			return err, false, false
		}
		f.verify = true
	case isSequenceStart(f.start) && awserr.Is(err, "InvalidArgumentException"):
		f.verify = false
		if rerr := outOfRange(f.start, listed); rerr != nil {
			r.stopOnPosition(ctx, f.start, fmt.Errorf("%v (Kinesis refused it: %v)", rerr, err))
			return err, false, false
		}
		if f.fallback == nil {
			// Each refusal looks again: a start refused while its record
			// was there may have been trimmed since.
			f.fallback = &trimFallback{from: f.start}
			if !f.refused {
				r.log.Warnf("reading from %v was refused (%v): reading from the oldest record (TRIM_HORIZON) instead, skipping every record up to that position if it is older than the retention period", f.start, err)
			}
			return err, true, true
		}
	default:
		f.verify = false
	}
	return err, false, true
}
