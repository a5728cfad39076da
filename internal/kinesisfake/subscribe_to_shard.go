package kinesisfake

import (
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// Behavior: SubscribeToShard.
//
// AWS answers a subscription of an ACTIVE consumer (ConsumerARN) to a shard
// with HTTP 200 and an event stream (application/vnd.amazon.eventstream, over
// HTTP/2): first an initial-response event, then SubscribeToShardEvent events
// carrying Records, ContinuationSequenceNumber and MillisBehindLatest, pushed
// as records arrive (about 70 ms), at most 2 MiB per second per shard for each
// consumer. ContinuationSequenceNumber resumes the subscription with
// AFTER_SEQUENCE_NUMBER (it also advances without data); at the end of a
// closed shard it is null and the event carries ChildShards. Errors before the
// stream are HTTP errors: an unknown consumer, stream or shard is
// ResourceNotFoundException, a consumer that is not ACTIVE is
// ResourceInUseException, more than 1 call per second per consumer and shard
// is LimitExceededException, a starting sequence number older than the trim
// horizon is InvalidArgumentException (see retention.go), and a second
// successful subscribe of the same consumer and shard within 5 s of the
// previous one is ResourceInUseException. A subscribe 5 s or more later takes
// the subscription over. A subscription lasts at most 5 minutes and then ends
// cleanly. Errors during the stream arrive as exception frames (:message-type
// exception, :exception-type code).
//
// The fake does the same, over HTTP/2 (TLS or h2c) or HTTP/1.1 (chunked).
// Choices where AWS is silent or vague:
//
//   - The 1 call/s limit is checked before the 5 s rule, so a second call
//     within a second gets LimitExceededException, and within 5 s
//     ResourceInUseException. The window is SubscribeTakeoverWindow; it runs
//     from the last successful subscribe whether or not that subscription is
//     still open.
//   - On takeover the old subscription gets a ResourceInUseException exception
//     frame and its stream ends.
//   - Deregistering the consumer or deleting the stream sends live
//     subscriptions a ResourceNotFoundException exception frame; the stream
//     ends.
//   - Records are pushed as soon as they are stored: a put wakes the
//     subscription, which never polls. An event holds at most MaxEventRecords
//     records and MaxEventBytes record bytes (defaults 10,000 and 1 MiB).
//   - An idle subscription gets an empty event after SubscriptionHeartbeat
//     (default 5 s) without events; it carries the current continuation.
//   - ContinuationSequenceNumber is the sequence number of the last record at
//     or before the reader's position (the shard's StartingSequenceNumber when
//     there is none), so AFTER_SEQUENCE_NUMBER resumes exactly after the last
//     record delivered and never skips one.
//   - With ShardEndWithRecords (default) the event with a closed shard's last
//     records already carries the end; after the end event the stream ends.
//   - With quotas on, a subscription sends at most 2 MiB/s of record bytes
//     (a token bucket with a 2 MiB burst: an event waits until the bucket
//     holds its size; it never fails).
//   - Events are written to the connection as they are made and flushed; the
//     fake keeps nothing queued, so a client that stops reading blocks the
//     subscription's goroutine in Write (HTTP/2 flow control or TCP), and the
//     server's memory does not grow.
//   - Over HTTP/1.1, aws-sdk-go-v2 reports a connection lost mid-stream as a
//     clean end of the stream (Err() is nil); over HTTP/2 a reset stream is an
//     error. Clients must treat an end without a shard end or lifetime expiry
//     as a disconnection either way.

type subscribeInput struct {
	ConsumerARN      string
	ShardId          string
	StartingPosition *struct {
		Type           string
		SequenceNumber string
		Timestamp      *epochTime
	}
}

// subscription is one live SubscribeToShard stream. The state goroutine ends
// it by setting endCode/endMsg and closing done.
type subscription struct {
	id       uint64
	consumer *consumer
	shard    *shard
	start    int

	done    chan struct{}
	ended   bool // state goroutine only
	endCode string
	endMsg  string

	events  atomic.Int64 // events written, initial-response excluded
	written atomic.Int64 // bytes written
}

func (s *Server) subscribeToShard(w http.ResponseWriter, c *call) {
	var in subscribeInput
	if err := c.decode(&in); err != nil {
		s.answerError(w, c.op, err)
		return
	}
	if err := in.validate(); err != nil {
		s.answerError(w, c.op, err)
		return
	}
	var (
		sub  *subscription
		aerr *apiError
	)
	if err := s.do(func(st *state, now time.Time) { sub, aerr = st.subscribe(&in, now) }); err != nil {
		s.answerError(w, c.op, errf(CodeServiceUnavailable, "The server is shutting down."))
		return
	}
	if aerr != nil {
		s.answerError(w, c.op, aerr)
		return
	}
	defer func() { _ = s.do(func(st *state, _ time.Time) { st.unsubscribe(sub) }) }()

	reason := s.stream(w, c, sub, s.faults.takeSub(sub.shard.id))
	s.log.Info("kinesisfake: subscription ended", "consumer", sub.consumer.name, "shard", sub.shard.id,
		"proto", c.proto, "events", sub.events.Load(), "reason", reason)
}

func (in *subscribeInput) validate() *apiError {
	switch {
	case in.ConsumerARN == "":
		return errf(CodeValidation, "1 validation error detected: Value null at 'consumerARN' failed to satisfy constraint: Member must not be null")
	case in.ShardId == "":
		return errf(CodeValidation, "1 validation error detected: Value null at 'shardId' failed to satisfy constraint: Member must not be null")
	case in.StartingPosition == nil || in.StartingPosition.Type == "":
		return errf(CodeValidation, "1 validation error detected: Value null at 'startingPosition' failed to satisfy constraint: Member must not be null")
	}
	return nil
}

// subscribe checks a SubscribeToShard call and registers the subscription.
func (st *state) subscribe(in *subscribeInput, now time.Time) (*subscription, *apiError) {
	cons, err := st.lookupConsumerARN(in.ConsumerARN)
	if err != nil {
		return nil, err
	}
	sm := cons.stream
	if _, err := st.readableStream(streamRef{Name: sm.name}, now); err != nil {
		return nil, err
	}
	sh, err := st.lookupShard(sm, in.ShardId)
	if err != nil {
		return nil, err
	}
	if status := cons.status(now); status != statusActive {
		return nil, errf(CodeResourceInUse, "Consumer %s under account %s is %s, not ACTIVE.", cons.arn, st.s.cfg.acct, status)
	}
	if !st.limit("SubscribeToShard/"+cons.arn+"/"+sh.id, subscribeTPS, now) {
		return nil, errf(CodeLimitExceeded, "Consumer %s under account %s has exceeded its limit of 1 SubscribeToShard call per second for shard %s.", cons.arn, st.s.cfg.acct, sh.id)
	}
	if last, ok := cons.lastSub[sh.index]; ok && now.Sub(last) < st.s.cfg.subTakeover {
		return nil, errf(CodeResourceInUse, "Another active subscription exists for consumer %s on shard %s; a new one may take it over %v after it started.", cons.arn, sh.id, st.s.cfg.subTakeover)
	}
	sp := in.StartingPosition
	pos, err := startPos(sh, sp.Type, sp.SequenceNumber, sp.Timestamp, "SubscribeToShard", "StartingPosition.SequenceNumber")
	if err != nil {
		return nil, err
	}
	if old := cons.subs[sh.index]; old != nil {
		st.endSub(old, CodeResourceInUse, "This subscription was taken over by a newer SubscribeToShard call for consumer "+cons.arn+" on shard "+sh.id+".")
	}
	st.subSerial++
	sub := &subscription{id: st.subSerial, consumer: cons, shard: sh, start: pos, done: make(chan struct{})}
	cons.subs[sh.index] = sub
	cons.lastSub[sh.index] = now
	st.subs++
	return sub, nil
}

// endSub ends a subscription; code, if set, is sent as an exception frame.
func (st *state) endSub(sub *subscription, code, msg string) {
	if sub.ended {
		return
	}
	sub.ended, sub.endCode, sub.endMsg = true, code, msg
	close(sub.done)
	if sub.consumer.subs[sub.shard.index] == sub {
		delete(sub.consumer.subs, sub.shard.index)
	}
}

func (st *state) endConsumerSubs(c *consumer, code, msg string) {
	for _, sub := range c.subs {
		st.endSub(sub, code, msg)
	}
}

// unsubscribe forgets a subscription whose stream has ended.
func (st *state) unsubscribe(sub *subscription) {
	if sub.consumer.subs[sub.shard.index] == sub {
		delete(sub.consumer.subs, sub.shard.index)
	}
	st.subs--
}

// fetch reads the next event's worth of records for sub from pos. When there
// is nothing to send it also returns a channel closed when that changes.
func (st *state) fetch(sub *subscription, pos int, now time.Time) (res readResult, wait <-chan struct{}, ended bool) {
	if sub.ended {
		return res, nil, true
	}
	cfg := &st.s.cfg
	res = sub.shard.read(pos, cfg.maxEventRecords, cfg.maxEventBytes, cfg.shardEndWithRecords, now)
	if len(res.records) == 0 && !res.atEnd {
		wait = sub.shard.waitChan()
	}
	return res, wait, false
}

// stream writes the event stream of sub until it ends, and says why it ended.
func (s *Server) stream(w http.ResponseWriter, c *call, sub *subscription, fault *subFault) string {
	c.grace(math.MaxInt) // events are larger than a client's read buffer
	h := w.Header()
	h.Set("Content-Type", eventStreamTyp)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(frame []byte) bool {
		if _, err := w.Write(frame); err != nil {
			return false
		}
		sub.written.Add(int64(len(frame)))
		return rc.Flush() == nil
	}
	if !write(initialResponseFrame()) {
		return "client gone"
	}

	lifetime := time.NewTimer(s.cfg.subLifetime)
	defer lifetime.Stop()
	heartbeat := time.NewTimer(s.cfg.subHeartbeat)
	defer heartbeat.Stop()
	var budget *bucket
	if s.cfg.quotas {
		budget = newBucket(subscribeBytesPS, subscribeBytesPS, time.Now())
	}
	// sleep waits d; it reports false if the subscription must stop.
	sleep := func(d time.Duration) (bool, string) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true, ""
		case <-lifetime.C:
			return false, "lifetime over"
		case <-sub.done:
			return true, "" // seen by the next fetch
		case <-s.closing:
			return false, "server closing"
		case <-c.ctx.Done():
			return false, "client gone"
		}
	}

	var buf []byte
	pos := sub.start
	for {
		if fault != nil && sub.events.Load() == int64(fault.after) {
			switch fault.kind {
			case subDrop:
				dropConnection(w)
				return "fault: connection dropped"
			case subException:
				write(exceptionFrame(fault.code, "Injected fault."))
				return "fault: exception " + fault.code
			case subStall:
				d := fault.stall
				fault = nil
				if ok, why := sleep(d); !ok {
					return why
				}
				heartbeat.Reset(s.cfg.subHeartbeat)
			}
		}

		var (
			res   readResult
			wait  <-chan struct{}
			ended bool
		)
		if err := s.do(func(st *state, now time.Time) { res, wait, ended = st.fetch(sub, pos, now) }); err != nil {
			return "server closing"
		}
		if ended {
			if sub.endCode != "" {
				write(exceptionFrame(sub.endCode, sub.endMsg))
				return "ended: " + sub.endCode
			}
			return "ended"
		}
		if wait != nil {
			select {
			case <-wait:
				continue
			case <-sub.done:
				continue
			case <-heartbeat.C:
				// An empty event with the current continuation; sent below.
			case <-lifetime.C:
				return "lifetime over"
			case <-s.closing:
				return "server closing"
			case <-c.ctx.Done():
				return "client gone"
			}
		}
		if budget != nil && res.bytes > 0 {
			if d := budget.waitFor(time.Now(), float64(res.bytes)); d > 0 {
				if ok, why := sleep(d); !ok {
					return why
				}
			}
			budget.charge(time.Now(), float64(res.bytes))
		}
		buf = appendEventFrame(buf[:0], &res)
		if !write(buf) {
			return "client gone"
		}
		sub.events.Add(1)
		pos = res.next
		if res.atEnd {
			return "shard end"
		}
		heartbeat.Reset(s.cfg.subHeartbeat)
		select {
		case <-lifetime.C:
			return "lifetime over"
		default:
		}
	}
}
