package input

import (
	"math/rand/v2"
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

// replay is one rejected batch. batch is the pristine original: every
// delivery is a copy, since processors may change messages in place.
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
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
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
