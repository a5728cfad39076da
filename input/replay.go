package input

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Replay backoff: a rejected batch comes again at once the first time, then
// after a growing, jittered pause, so an output that keeps failing is not
// hammered.
const (
	replayInitial = 100 * time.Millisecond
	replayMax     = 5 * time.Second
)

// replays holds the batches the pipeline rejected (nacked) with
// auto_replay_nacks on, until ReadBatch hands them out again. It replaces
// Benthos' AutoRetryNacksBatched wrapper, whose wait for a retry can miss the
// end of its context and hang the pipeline's shutdown (benthos v4.60.0,
// autoretry.List.Shift after a cancelled backoff); here ReadBatch always
// returns when its context or the input ends.
type replays struct {
	mu    sync.Mutex
	queue []*replay     // in the order they were rejected
	added chan struct{} // receives a value (never blocking) when a batch is queued
}

// replay is one rejected batch. batch is the pristine original (narrowed to
// the messages that failed): every delivery is a copy, since processors may
// change messages in place.
type replay struct {
	batch    service.MessageBatch
	ack      func(error)
	attempts int       // deliveries rejected so far
	at       time.Time // not before
}

func newReplays() *replays {
	return &replays{added: make(chan struct{}, 1)}
}

// add queues r to come again after its backoff.
func (q *replays) add(r *replay, now time.Time) {
	r.attempts++
	r.at = now.Add(replayDelay(r.attempts))
	q.mu.Lock()
	q.queue = append(q.queue, r)
	q.mu.Unlock()
	select {
	case q.added <- struct{}{}:
	default:
	}
}

// next takes the first batch due at now. When none is due it returns how
// long until one is (0: the queue is empty).
func (q *replays) next(now time.Time) (*replay, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var wait time.Duration
	for i, r := range q.queue {
		if !r.at.After(now) {
			q.queue = slices.Delete(q.queue, i, i+1)
			return r, 0
		}
		if d := r.at.Sub(now); wait == 0 || d < wait {
			wait = d
		}
	}
	return nil, wait
}

// replayDelay is the pause before a batch rejected attempts times comes
// again: none after the first rejection, then 100 ms doubling to 5 s, each
// between half and all of that.
func replayDelay(attempts int) time.Duration {
	if attempts <= 1 {
		return 0
	}
	d := replayInitial << min(attempts-2, 10)
	d = min(d, replayMax)
	return d/2 + rand.N(d/2+1)
}

// hand delivers a copy of r's batch, indexed so that an error naming some of
// its messages can be traced back to them. Acknowledging it resolves r; a
// rejection queues r again, narrowed to the messages that failed.
func (in *kinesisInput) hand(r *replay) (service.MessageBatch, service.AckFunc, error) {
	out := r.batch.Copy()
	idx := out.Index()
	var once sync.Once
	return out, func(_ context.Context, err error) error {
		once.Do(func() {
			if err == nil {
				r.ack(nil)
				return
			}
			r.batch = failedOnly(r.batch, idx, err)
			in.replays.add(r, time.Now())
		})
		return nil
	}, nil
}

// failedOnly returns the messages of batch that err names as failed, in
// batch order, or the whole batch when err names none (a plain error, or a
// batch error whose messages cannot be traced back through idx).
func failedOnly(batch service.MessageBatch, idx *service.Indexer, err error) service.MessageBatch {
	var berr *service.BatchError
	if !errors.As(err, &berr) || berr.IndexedErrors() == 0 {
		return batch
	}
	failed := make([]bool, len(batch))
	n := 0
	berr.WalkMessagesIndexedBy(idx, func(i int, _ *service.Message, err error) bool {
		if err != nil && i >= 0 && i < len(batch) && !failed[i] {
			failed[i] = true
			n++
		}
		return true
	})
	if n == 0 {
		return batch
	}
	narrowed := make(service.MessageBatch, 0, n)
	for i, m := range batch {
		if failed[i] {
			narrowed = append(narrowed, m)
		}
	}
	return narrowed
}
