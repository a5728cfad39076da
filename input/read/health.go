package read

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// A stream's health: whether it can be read at all. The input's /ready
// follows it (input/health.go): a stream is unreadable when every shard it
// would read stopped on a position the shard cannot hold or on stored state
// that cannot be read, or when its shards cannot be listed, or its
// checkpoints stored, for a while with no reader left.

const (
	// listingFailsFor is how long a stream's listing fails, with no shard
	// of it read, before the stream counts as unreadable.
	listingFailsFor = 30 * time.Second
	// storeFailsFor is how long storing a stream's checkpoints fails (with
	// a lease table: its heartbeats and lease writes, so its leases lapse
	// and its readers stop), with no shard of it read, before the stream
	// counts as unreadable.
	storeFailsFor = 30 * time.Second
)

// streamHealth is what a stream's readers and run loop tell of whether it
// can be read; safe for concurrent use.
type streamHealth struct {
	mu sync.Mutex
	// stopped are the shards whose readers stopped on a position the
	// shard cannot hold (kinesis_shard_stopped).
	stopped map[string]bool
	// readable is how many shards the stream would read now (known, not
	// finished, every parent finished), reading how many have a reader,
	// and broken those not read because what is stored for them cannot be
	// read (kinesis_broken_checkpoints; their readers stop too): counted
	// by the run loop.
	readable, reading int
	broken            map[string]bool
	// listing and storing say since when listing the shards and storing
	// the checkpoints fail.
	listing, storing failing
}

// failing is since when a call made again and again fails (zero: the last
// one succeeded), and why.
type failing struct {
	since time.Time
	err   error
}

// record takes in the outcome of a call at now.
func (f *failing) record(now time.Time, err error) {
	switch {
	case err == nil:
		*f = failing{}
	case f.since.IsZero():
		*f = failing{now, err}
	default:
		f.err = err
	}
}

// lasting reports whether the calls failed for at least d at now.
func (f failing) lasting(now time.Time, d time.Duration) bool {
	return !f.since.IsZero() && now.Sub(f.since) >= d
}

func (h *streamHealth) setStopped(shardID string, stopped bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped == nil {
		h.stopped = map[string]bool{}
	}
	if stopped {
		h.stopped[shardID] = true
	} else {
		delete(h.stopped, shardID)
	}
}

func (h *streamHealth) counted(readable, reading int, broken map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readable, h.reading, h.broken = readable, reading, broken
}

// listed records the outcome of a listing at now.
func (h *streamHealth) listed(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listing.record(now, err)
}

// committed records the outcome of a commit at now.
func (h *streamHealth) committed(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.storing.record(now, err)
}

// unreadable says why stream name cannot be read at now, or "".
func (h *streamHealth) unreadable(name string, now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var stopped, broken []string
	for id := range h.stopped {
		if !h.broken[id] {
			stopped = append(stopped, id)
		}
	}
	for id := range h.broken {
		broken = append(broken, id)
	}
	switch {
	case h.readable > 0 && len(stopped)+len(broken) >= h.readable:
		sort.Strings(stopped)
		sort.Strings(broken)
		var parts []string
		if len(stopped) > 0 {
			parts = append(parts, fmt.Sprintf("%d stopped on a checkpoint the shard cannot hold (%s; kinesis_shard_stopped)", len(stopped), strings.Join(stopped, ", ")))
		}
		if len(broken) > 0 {
			parts = append(parts, fmt.Sprintf("%d not read because what is stored for them cannot be read (%s; kinesis_broken_checkpoints)", len(broken), strings.Join(broken, ", ")))
		}
		return fmt.Sprintf("stream %s: no shard can be read: %s; the errors logged for each name the fix (benthos-kinesis checkpoint set)", name, strings.Join(parts, ", "))
	case h.listing.lasting(now, listingFailsFor) && h.reading == 0:
		return fmt.Sprintf("stream %s: its shards cannot be listed for %v and none is read: %v", name, now.Sub(h.listing.since).Round(time.Second), h.listing.err)
	case h.storing.lasting(now, storeFailsFor) && h.reading == 0:
		return fmt.Sprintf("stream %s: its checkpoints cannot be stored for %v and none of its shards is read: %v", name, now.Sub(h.storing.since).Round(time.Second), h.storing.err)
	}
	return ""
}
