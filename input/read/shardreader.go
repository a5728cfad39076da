package read

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// pendingRead is a read waiting to be emitted: messages already converted
// (with the position of each), then the records of b from next on, which
// are converted a part at a time as room is made for them. A part may end
// inside an aggregate: next is then that record, which the converter holds
// open and goes on with.
type pendingRead struct {
	msgs      service.MessageBatch
	positions []checkpoint.Position
	b         shard.Batch
	next      int
	// room is the budget's room the records of b from next on hold.
	room int64
}

// shardReader reads one shard: a publisher goroutine fetches batches and
// hands them over one at a time (so a slow pipeline stops the fetching, not
// grows a queue); the reader's own loop turns them into Benthos batches,
// tracks them until acknowledged and, at the shard's end, waits for the last
// acknowledgement and commits the end before reporting it.
type shardReader struct {
	s    *Stream
	log  shardLog
	info shardInfo
	cp   checkpoint.Checkpoint
	// g is the reader's grant: its acknowledgements go there, and it says
	// until when records may be handed out.
	g       grant
	tracker *ackTracker
	conv    *converter
	mem     readMemory
	reads   readPipe
	hold    emitHold
	// policy is the batch policy's state; nil when the policy is empty.
	policy *batchPolicy
	// warnBehind is the count of records read past the checkpoint at which
	// the next warning is due; it doubles with each warning.
	warnBehind int
}

// grant is the reader's grant, with what stops the reader when it lapses.
type grant struct {
	coord.Grant
	// lapse fires when the grant lapses (reused by every emit).
	lapse *time.Timer
	// stop stops the reader, with a cause (see delivery.Withdraw).
	stop context.CancelCauseFunc
}

// readMemory is the room of the memory budget a reader holds.
type readMemory struct {
	// ledger holds the budget's room of the messages converted and not
	// yet resolved.
	ledger *roomLedger
	// member is the reader's share of the budget (membudget.Join); nil
	// without a limit.
	member *membudget.Member
}

// room is the reader's member as its publisher takes room from it: nil
// without a budget.
func (m readMemory) room() shard.Room {
	if m.member == nil {
		return nil
	}
	return m.member
}

// readPipe carries the publisher goroutine's reads to the reader's loop.
type readPipe struct {
	batches <-chan shard.Batch
	// ready tells the publisher goroutine that it may fetch the next read
	// (see emitPending): a shard holds one read being emitted and at most
	// one more, not a queue of them.
	ready chan struct{}
}

// emitHold is what the reader's loop holds while merging reads into a
// batch waiting for the pipeline: a read that ended the shard, and a read
// that did not fit.
type emitHold struct {
	end  *shard.Batch
	read *pendingRead
}

// batchPolicy is the state of a shard's batch policy.
type batchPolicy struct {
	batcher   *service.Batcher
	hasPeriod bool
	// uncounted: the batch policy has no count, so checkpoint.limit bounds
	// what the batcher holds (a read of aggregates of many empty user
	// records would never reach a byte size).
	uncounted bool
	pending   int                 // records added to the batcher since its last flush
	lastPos   checkpoint.Position // of the last record added to the batcher
	// room is the room of the messages the batcher holds, taken again when
	// they are flushed.
	room int64
}

// BehindWarnFactor: a warning is due once this many times checkpoint.limit
// records were read past a checkpoint that does not move.
const BehindWarnFactor = 10

// newShardReader returns the reader of a shard for a grant; stop stops it.
func newShardReader(s *Stream, info shardInfo, g coord.Grant, stop context.CancelCauseFunc) *shardReader {
	cp := g.Start()
	log := newShardLog(s.env.Log, s.conf.Name, info.id)
	r := &shardReader{
		s:       s,
		log:     log,
		info:    info,
		cp:      cp,
		g:       grant{Grant: g, stop: stop},
		tracker: newAckTracker(s.env.Limits.Checkpoint),
		conv:    newConverter(s, log, info, cp.Position),
		// Counted in the budget's shares from now, before its reader runs:
		// the first readers of a stream must not take shares meant for
		// fewer.
		mem: readMemory{ledger: &roomLedger{budget: s.env.Budget}, member: s.env.Budget.Join()},
	}
	r.tracker.resolved = r.mem.ledger.resolve
	r.tracker.strict = s.env.Limits.StrictOrder
	r.tracker.report = func(behind, pending int) {
		s.env.Metrics.pastCheckpoint.Set(int64(behind), s.conf.Name, info.id)
		s.env.Metrics.unacknowledged.Set(int64(pending), s.conf.Name, info.id)
	}
	r.warnBehind = BehindWarnFactor * r.tracker.limit
	if cp.Position != nil {
		p := *cp.Position
		r.tracker.last = &p
	}
	return r
}

// refuse keeps the shard unread until ctx ends: its stored checkpoint
// cannot be read from (err names the store, the value and the fix).
// Reading it from anywhere else would skip or repeat records.
func (r *shardReader) refuse(ctx context.Context, err error) {
	r.stayStopped(ctx, fmt.Sprintf("not read: %v", err))
}

// stayStopped keeps the shard unread until ctx ends, as an operator must
// set its checkpoint first: why is said at ERROR now and every
// coord.ReportAgain, and kinesis_shard_stopped is 1 meanwhile.
func (r *shardReader) stayStopped(ctx context.Context, why string) {
	r.setStopped(true)
	defer r.setStopped(false)
	t := time.NewTicker(coord.ReportAgain)
	defer t.Stop()
	for {
		r.log.Errorf("%s", why)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setStopped tells kinesis_shard_stopped and the stream's health whether
// the shard is stopped on a position it cannot hold.
func (r *shardReader) setStopped(stopped bool) {
	v := int64(0)
	if stopped {
		v = 1
	}
	r.s.env.Metrics.stopped.Set(v, r.s.conf.Name, r.info.id)
	r.s.health.setStopped(r.info.id, stopped)
}

// run reads the shard until it ends or ctx ends.
func (r *shardReader) run(ctx context.Context) shardEvent {
	ev := shardEvent{shardID: r.info.id}
	defer r.releaseRoom() // last: after the publisher goroutine is joined
	defer r.mem.member.Leave()
	start, err := r.cp.Resume()
	if err != nil {
		r.refuse(ctx, err)
		return ev
	}
	if !r.s.env.Batching.IsNoop() {
		b, err := r.s.env.Batching.NewBatcher(r.s.env.Resources)
		if err != nil {
			r.log.Errorf("creating the batcher: %v", err)
			<-ctx.Done()
			return ev
		}
		r.policy = &batchPolicy{batcher: b, hasPeriod: r.s.env.Batching.Period != "", uncounted: r.s.env.Batching.Count <= 0}
		defer b.Close(context.Background())
	}
	r.log.Debugf("reading from %v", start)
	defer r.startFetching(ctx, start)()
	return r.loop(ctx, ev)
}

// startFetching starts the publisher goroutine, which fetches reads from
// start into r.reads; the function returned stops it and waits for it.
func (r *shardReader) startFetching(ctx context.Context, start shard.Start) (stop func()) {
	pctx, pcancel := context.WithCancel(ctx)
	batches := make(chan shard.Batch)
	r.reads = readPipe{batches: batches, ready: make(chan struct{}, 1)}
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		defer close(batches)
		r.publish(pctx, start, batches)
	}()
	return func() {
		pcancel()
		pwg.Wait()
	}
}

// loop takes the publisher's reads until the shard ends or ctx ends; with
// a batch policy that has a period, it flushes the batcher when due.
func (r *shardReader) loop(ctx context.Context, ev shardEvent) shardEvent {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var flushC <-chan time.Time
		if r.policy != nil && r.policy.hasPeriod && r.policy.pending > 0 {
			if d, ok := r.policy.batcher.UntilNext(); ok {
				timer.Reset(d)
				flushC = timer.C
			} else if err := r.flush(ctx); err != nil {
				return ev
			}
		}
		select {
		case <-ctx.Done():
			return ev
		case <-flushC:
			if err := r.flush(ctx); err != nil {
				return ev
			}
		case b, ok := <-r.reads.batches:
			if !ok {
				// The publisher stops only when ctx ends or after the shard's
				// end, which returns below; anything else is a bug, and a
				// pause keeps it from becoming a hot loop of restarts.
				if ctx.Err() == nil {
					r.log.Errorf("the reader stopped before the shard's end; restarting it")
					backoff.Sleep(ctx, time.Second)
				}
				return ev
			}
			if err := r.take(ctx, b); err != nil {
				return ev
			}
			if b.End {
				return r.finish(ctx, b)
			}
			if r.hold.end != nil {
				return r.finish(ctx, *r.hold.end)
			}
		}
		timer.Stop()
	}
}

// take turns a read into batches and emits them, then the reads that
// joined them and did not fit.
func (r *shardReader) take(ctx context.Context, b shard.Batch) error {
	if err := r.handle(ctx, b); err != nil {
		return err
	}
	for r.hold.read != nil {
		h := r.hold.read
		r.hold.read = nil
		if err := r.emitPending(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// awaitReset waits, after err found the shard listed under this reader's id
// to be another one (the stream was created again), for discovery to reset
// the stream and end this reader.
func (r *shardReader) awaitReset(ctx context.Context, err error) {
	r.log.Warnf("%v; waiting for shard discovery to start the new stream's readers", err)
	<-ctx.Done()
}

// checkpointExpired reports that the record of a refused start was trimmed:
// what followed it within the retention period is read, what passed the
// retention period too is lost.
func (r *shardReader) checkpointExpired(from shard.Start) {
	r.s.env.Metrics.expired.Incr(1, r.s.conf.Name, r.info.id)
	r.log.Warnf("checkpoint %s expired: its record is older than the stream's retention period and was trimmed; reading goes on from the oldest record left, and the records after the checkpoint that were older than the retention period too are lost",
		from.Sequence)
}

// releaseRoom gives back, once the reader stopped, the budget's room of
// what it read and never handed to the pipeline: a read left unconverted,
// and the messages converted and never tracked. Messages in flight give
// theirs back as the pipeline resolves them.
func (r *shardReader) releaseRoom() {
	if r.hold.read != nil {
		r.mem.ledger.give(r.hold.read.room)
		r.hold.read.room = 0
	}
	r.tracker.withPending(r.mem.ledger.exited)
}

// handle turns a publisher batch into messages and emits them.
func (r *shardReader) handle(ctx context.Context, b shard.Batch) error {
	id := r.info.id
	r.s.setBehind(id, b.MillisBehindLatest)
	if r.policy == nil {
		return r.emitPending(ctx, &pendingRead{b: b, room: b.Room})
	}
	r.readyForMore()
	// A part of at most checkpoint.limit messages at a time: a read whose
	// aggregates hold many user records is not converted whole while the
	// batcher flushes.
	// The read's room is given back as its records are converted: messages
	// waiting in the batcher hold none (a batch waiting for records would
	// otherwise hold the room they need), and take it again, forced, when
	// the batcher flushes them into the pipeline (flush).
	room := b.Room
	defer func() { r.mem.ledger.give(room) }()
	for next := 0; next < len(b.Records); {
		var msgs service.MessageBatch
		from := next
		msgs, _, _, next = r.conv.convertPart(b, next, r.tracker.limit)
		share := shareOf(&room, from, next, len(b.Records))
		r.mem.ledger.give(share)
		positions := r.conv.takePositions()
		for i, m := range msgs {
			r.policy.pending++
			r.policy.room += share / int64(len(msgs))
			r.policy.lastPos = positions[i]
			if r.policy.batcher.Add(m) || (r.policy.uncounted && r.policy.pending >= r.tracker.limit) {
				if err := r.flush(ctx); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// flush emits what the batcher holds.
func (r *shardReader) flush(ctx context.Context) error {
	if r.policy.pending == 0 {
		return nil
	}
	batch, err := r.policy.batcher.Flush(ctx)
	n, pos, room := r.policy.pending, r.policy.lastPos, r.policy.room
	r.policy.pending, r.policy.lastPos, r.policy.room = 0, checkpoint.Position{}, 0 // lastPos would keep its read's strings
	if err == nil && len(batch) == 0 && ctx.Err() != nil {
		// Benthos drops a batch whose processors the end of ctx interrupted
		// (v4.60.0 logs "the batch has been dropped"): those records never
		// reached the pipeline. They are not tracked, so the checkpoint stays
		// before them and a restart reads them again.
		return ctx.Err()
	}
	// The ledger counts what the tracker resolves: n records, whatever
	// the batch policy's processors made of them.
	if err != nil {
		// Never pass records that did not reach the pipeline: hold the
		// checkpoint before them as a nack does.
		r.mem.ledger.flushed(n, 0)
		e, terr := r.tracker.Track(ctx, pos, n)
		if terr != nil {
			return terr
		}
		r.tracker.Ack(e, err)
		r.log.Errorf("the batch policy failed on %d records ending at %v (%v): they did not reach the pipeline, and the shard's checkpoint stays before them until a restart reads them again", n, pos, err)
		return nil
	}
	r.mem.ledger.flushed(n, room)
	return r.emit(ctx, batch, pos, n, false)
}

// readyForMore lets the publisher goroutine fetch the next read.
func (r *shardReader) readyForMore() {
	select {
	case r.reads.ready <- struct{}{}:
	default:
	}
}

// emitPending emits a read, without a batch policy: its converted messages,
// then its records converted a part of at most checkpoint.limit messages at
// a time, so that a large read holds messages for one part, not for all of
// its records. After a large read the publisher fetches the next one once
// the last part is out, so that a shard never holds two large reads (the
// peak memory of a backlog drained by many shards; the fetch takes less
// than the pipeline takes to drain the part). After a small read (at the
// tip) the next is fetched as its last part waits for the pipeline, to
// join it there.
func (r *shardReader) emitPending(ctx context.Context, p *pendingRead) (err error) {
	defer func() {
		if err != nil { // the records left unconverted give their room back
			r.mem.ledger.give(p.room)
			p.room = 0
		}
	}()
	early := len(p.b.Records) <= r.tracker.limit
	for {
		last := p.next >= len(p.b.Records)
		if last && early {
			r.readyForMore()
		}
		if len(p.msgs) > 0 {
			if err := r.emitRead(ctx, p.msgs, p.positions, last && early); err != nil {
				return err
			}
		}
		if last {
			if !early {
				r.readyForMore()
			}
			return nil
		}
		msgs, _, _, next := r.conv.convertPart(p.b, p.next, r.tracker.limit)
		r.mem.ledger.charge(&p.room, p.next, next, len(p.b.Records), len(msgs))
		p.msgs, p.positions, p.next = msgs, r.conv.takePositions(), next
	}
}

// emitRead emits messages of one read in batches no larger than the
// tracker's room (so at most checkpoint.limit records), so that the limit
// also bounds what a large read puts in flight. last says they end the read.
func (r *shardReader) emitRead(ctx context.Context, msgs service.MessageBatch, positions []checkpoint.Position, last bool) error {
	for start := 0; start < len(msgs); {
		// A batch no larger than the room left is admitted at once. Waiting
		// for room for a larger one could wait for ever: the records in
		// flight may be held by an output batching by count, for records that
		// only this read can give it.
		end := min(start+r.tracker.Room(), len(msgs))
		// Only the read's last batch may take in later reads: they must
		// follow every record of this one.
		if err := r.emit(ctx, msgs[start:end], positions[end-1], end-start, last && end == len(msgs)); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// emit tracks a batch of n records ending at pos and hands it to ReadBatch.
//
// With join (no batch policy), the shard's next reads join the batch while it
// waits for the pipeline, up to checkpoint.limit records: a busy pipeline gets
// fewer, larger batches from a shard instead of a queue of small ones (which
// would also let a shard of small reads fall behind shards of large ones).
//
// With strict_order the batch is tracked, and so handed over, only once the
// shard's previous batch is resolved; reads join it meanwhile.
func (r *shardReader) emit(ctx context.Context, batch service.MessageBatch, pos checkpoint.Position, n int, join bool) error {
	w := waiting{batch: batch, pos: pos, n: n}
	if !r.tracker.strict || len(batch) == 0 {
		var err error
		if w.e, err = r.tracker.Track(ctx, pos, n); err != nil {
			return err
		}
		if len(batch) == 0 { // batch processors dropped everything
			r.ack(w.e, nil)
			return nil
		}
	}
	more := r.reads.batches
	if !join || r.hold.end != nil {
		more = nil
	}
	var d *delivery
	sent := false
	defer func() {
		if w.e != nil && !sent {
			// Tracked and never handed out: nobody waits for it, and the
			// checkpoint stays before it.
			r.tracker.Ack(w.e, errNotHandedOut)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err // a lost lease stops the reader before anything more goes out
		}
		lapsed, err := r.lapsed()
		if err != nil {
			return err
		}
		var out chan<- Delivery
		var idle <-chan struct{}
		if w.e == nil {
			idle = r.tracker.Idle()
		} else {
			if d == nil {
				d = &delivery{r: r, e: w.e}
				r.watchBehind()
			}
			d.batch = w.batch
			out = r.s.env.Out
		}
		select {
		case out <- d:
			sent = true
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-lapsed: // checked at the top of the loop
		case <-idle:
			w.e = r.tracker.TryTrack(w.pos, w.n)
		case b, ok := <-more:
			if !ok || !r.joinRead(&w, b) {
				more = nil // closed: the run loop sees the close next
			}
		}
	}
}

// waiting is a batch emit holds until the pipeline takes it.
type waiting struct {
	batch service.MessageBatch
	pos   checkpoint.Position // of its last record
	n     int                 // its records
	// e is the batch as tracked; nil until it is (with strict_order, once
	// the shard's previous batch is resolved).
	e *tracked
}

// joinRead joins a read that arrived while w waited for the pipeline, as
// far as the tracker's room allows; what does not fit is held for
// emitPending. It reports whether later reads may still join.
func (r *shardReader) joinRead(w *waiting, b shard.Batch) (more bool) {
	r.s.setBehind(r.info.id, b.MillisBehindLatest)
	more = true
	if b.End {
		end := b
		r.hold.end, more = &end, false
	}
	if len(b.Records) > r.tracker.limit {
		// More than could join: left whole for emitPending, which
		// converts it a part at a time.
		r.hold.read = &pendingRead{b: b, room: b.Room}
		return false
	}
	room := b.Room
	msgs, last, m, next := r.conv.convertPart(b, 0, r.tracker.limit)
	r.mem.ledger.charge(&room, 0, next, len(b.Records), len(msgs))
	positions := r.conv.takePositions()
	if next < len(b.Records) {
		// Aggregates of more user records than could join: the rest is
		// left for emitPending, which converts it a part at a time.
		r.hold.read = &pendingRead{msgs: msgs, positions: positions, b: b, next: next, room: room}
		return false
	}
	if m == 0 {
		r.readyForMore()
		return more
	}
	switch {
	case w.e != nil && r.tracker.Grow(w.e, last, m):
	case w.e == nil && w.n+m <= r.tracker.Room():
		w.pos, w.n = last, w.n+m
	default:
		r.hold.read = &pendingRead{msgs: msgs, positions: positions}
		return false
	}
	r.readyForMore()
	w.batch = append(w.batch, msgs...)
	r.watchBehind()
	return more
}

// lapsed returns a channel that fires when the reader's grant lapses (nil
// for a grant that never does: no timer on the local store's hot path), or
// errLapsed when it has: not renewed for a lease period (the process was
// paused, or the table is unreachable), so another instance may read the
// shard now. The timer is the reader's, reused by every emit.
func (r *shardReader) lapsed() (<-chan time.Time, error) {
	until := r.g.Until()
	if until.Equal(coord.Never) {
		return nil, nil
	}
	wait := time.Until(until)
	if wait <= 0 {
		return nil, errLapsed
	}
	if r.g.lapse == nil {
		r.g.lapse = time.NewTimer(wait)
	} else {
		r.g.lapse.Reset(wait)
	}
	return r.g.lapse.C, nil
}

func (r *shardReader) ack(e *tracked, err error) {
	pos, moved := r.tracker.Ack(e, err)
	if err != nil && !r.s.env.Limits.ReplayNacks {
		r.log.Warnf("a batch ending at %v was rejected (%v) and auto_replay_nacks is false: the shard's checkpoint stays before it until a restart reads it again", e.pos, err)
	}
	if moved {
		r.g.Acked(pos)
	}
}

// watchBehind warns while the records read past the shard's checkpoint keep
// growing: a batch the output keeps rejecting holds the checkpoint, and a
// restart would read them all again (the tracker reports the count to the
// gauge kinesis_records_past_checkpoint). Only the reader's goroutine calls it.
func (r *shardReader) watchBehind() {
	behind := r.tracker.Behind()
	first := BehindWarnFactor * r.tracker.limit
	switch {
	case behind < first:
		r.warnBehind = first
	case behind >= r.warnBehind:
		r.warnBehind *= 2
		at := "its start"
		if cp := r.tracker.Checkpoint(); cp != nil {
			at = cp.String()
		}
		r.log.Warnf("%d records were read past the shard's checkpoint (%s), which waits for a batch that is still not acknowledged (rejected and replayed, or held by the output): a restart now would read all of them again (metric kinesis_records_past_checkpoint)", behind, at)
	}
}

// finish completes a shard that was read to its end: once every record is
// acknowledged it commits the end, then reports the children.
func (r *shardReader) finish(ctx context.Context, b shard.Batch) shardEvent {
	ev := shardEvent{shardID: r.info.id}
	if r.policy != nil {
		if err := r.flush(ctx); err != nil {
			return ev
		}
	}
	if r.tracker.Frozen() {
		r.log.Warnf("read to its end, but a rejected batch holds its checkpoint: its child shards are read after a restart")
	}
	if err := r.tracker.Drained(ctx); err != nil {
		return ev
	}
	for {
		err := r.g.Ended(ctx, r.tracker.Checkpoint())
		if err == nil {
			break
		}
		r.log.Errorf("%v", err)
		if backoff.Sleep(ctx, time.Second) != nil {
			return ev
		}
	}
	r.log.Debugf("read to its end")
	// Benthos' metrics API cannot remove a series: a finished shard's gauges
	// go to zero, so that no dashboard shows lag of a shard that is done.
	r.s.zeroShardGauges(r.info.id)
	ev.ended = true
	for _, c := range b.ChildShards {
		ev.children = append(ev.children, childShardInfo(c))
	}
	return ev
}
