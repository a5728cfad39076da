package kinesisfake

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// state is everything the fake knows about streams, shards, records and
// consumers. Only the state goroutine (see loop.go) touches it.
type state struct {
	s *Server

	counter    uint64 // the sequence-number counter, see sequence.go
	nextSerial int

	streams  map[string]*stream // by name, including CREATING and DELETING ones
	bySerial map[int]*stream

	buckets map[string]*bucket

	nextSweep time.Time // earliest pending DELETING deadline
	subs      int       // live subscriptions
	subSerial uint64
}

type stream struct {
	name    string
	arn     string
	serial  int
	created time.Time

	activeAt      time.Time // CREATING until then
	updatingUntil time.Time // UPDATING until then
	deleting      bool
	deleteAt      time.Time

	shards    []*shard // by index: shard i is shardId-<i>
	consumers []*consumer

	props    streamProps
	autoNext int // the turn of the next record of an AUTO stream
}

type shard struct {
	id     string
	index  int
	stream *stream

	start, end       hashKey
	startStr, endStr string

	parent, adjacentParent string
	children               []*shard

	startCounter uint64
	startSeq     string
	closed       bool
	endCounter   uint64
	endSeq       string
	opened       time.Time
	closedAt     time.Time // opened and closedAt are in milliseconds, as on the wire
	initial      bool      // made by CreateStream

	records []record
	// trimmed counts the records at the front of records that are past
	// retention (see retention.go): kept in memory so that positions stay
	// indexes into records, but never read.
	trimmed int
	notify  chan struct{} // closed when records arrive or the shard closes
}

type record struct {
	counter uint64
	seq     string
	pk      string
	data    []byte
	arrival time.Time // truncated to milliseconds, as on the wire
}

func (r *record) size() int { return len(r.data) + len(r.pk) }

type consumer struct {
	name     string
	arn      string
	stream   *stream
	created  time.Time
	activeAt time.Time
	deleting bool
	deleteAt time.Time

	subs    map[int]*subscription // by shard index
	lastSub map[int]time.Time     // last successful subscribe, by shard index
}

func newState(s *Server) *state {
	return &state{
		s:          s,
		counter:    seqCounterBase,
		nextSerial: 1,
		streams:    map[string]*stream{},
		bySerial:   map[int]*stream{},
		buckets:    map[string]*bucket{},
	}
}

func (st *state) nextCounter() uint64 {
	st.counter++
	return st.counter
}

// Status strings, as the API spells them.
const (
	statusCreating = "CREATING"
	statusActive   = "ACTIVE"
	statusUpdating = "UPDATING"
	statusDeleting = "DELETING"
)

func (sm *stream) status(now time.Time) string {
	switch {
	case sm.deleting:
		return statusDeleting
	case now.Before(sm.activeAt):
		return statusCreating
	case now.Before(sm.updatingUntil):
		return statusUpdating
	}
	return statusActive
}

func (c *consumer) status(now time.Time) string {
	switch {
	case c.deleting:
		return statusDeleting
	case now.Before(c.activeAt):
		return statusCreating
	}
	return statusActive
}

// sweep removes streams and consumers whose DELETING time is over.
func (st *state) sweep(now time.Time) {
	if st.nextSweep.IsZero() || now.Before(st.nextSweep) {
		return
	}
	st.nextSweep = time.Time{}
	for name, sm := range st.streams {
		if sm.deleting {
			if !now.Before(sm.deleteAt) {
				delete(st.streams, name)
				delete(st.bySerial, sm.serial)
				continue
			}
			st.scheduleSweep(sm.deleteAt)
		}
		kept := sm.consumers[:0]
		for _, c := range sm.consumers {
			if c.deleting && !now.Before(c.deleteAt) {
				continue
			}
			if c.deleting {
				st.scheduleSweep(c.deleteAt)
			}
			kept = append(kept, c)
		}
		clear(sm.consumers[len(kept):])
		sm.consumers = kept
	}
}

func (st *state) scheduleSweep(at time.Time) {
	if st.nextSweep.IsZero() || at.Before(st.nextSweep) {
		st.nextSweep = at
	}
}

// streamRef is how a request names a stream: by name, by ARN, or both.
type streamRef struct {
	Name string
	ARN  string
}

// lookupStream resolves a stream named by name or ARN. It does not check the
// stream's status.
func (st *state) lookupStream(ref streamRef) (*stream, *apiError) {
	name := ref.Name
	if ref.ARN != "" {
		n, err := st.s.parseStreamARN(ref.ARN)
		if err != nil {
			return nil, err
		}
		if name != "" && name != n {
			return nil, errf(CodeInvalidArgument, "StreamName %s and StreamARN %s name different streams.", name, ref.ARN)
		}
		name = n
	}
	if name == "" {
		return nil, errf(CodeInvalidArgument, "Either StreamName or StreamARN should be provided.")
	}
	sm, ok := st.streams[name]
	if !ok {
		return nil, notFoundStream(st.s, name)
	}
	return sm, nil
}

// readableStream resolves a stream for a data-plane operation: a stream that
// is CREATING or DELETING is not found, as AWS answers.
func (st *state) readableStream(ref streamRef, now time.Time) (*stream, *apiError) {
	sm, err := st.lookupStream(ref)
	if err != nil {
		return nil, err
	}
	switch sm.status(now) {
	case statusCreating, statusDeleting:
		return nil, notFoundStream(st.s, sm.name)
	}
	return sm, nil
}

// activeStream resolves a stream for an operation that needs it ACTIVE (or
// UPDATING, when allowUpdating), answering ResourceInUseException otherwise.
func (st *state) activeStream(ref streamRef, now time.Time, allowUpdating bool) (*stream, *apiError) {
	sm, err := st.lookupStream(ref)
	if err != nil {
		return nil, err
	}
	status := sm.status(now)
	if status == statusActive || (allowUpdating && status == statusUpdating) {
		return sm, nil
	}
	return nil, errf(CodeResourceInUse, "Stream %s under account %s is %s; it must be ACTIVE for this operation.", sm.name, st.s.cfg.acct, status)
}

func shardIDFor(index int) string { return fmt.Sprintf("shardId-%012d", index) }

// parseShardID accepts "shardId-000000000001" and, as AWS does, the bare
// number.
func parseShardID(id string) (int, bool) {
	num := strings.TrimPrefix(id, "shardId-")
	if num == "" || len(num) > 12 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, false
		}
		n = n*10 + int(num[i]-'0')
	}
	return n, true
}

func (sm *stream) shard(id string) *shard {
	i, ok := parseShardID(id)
	if !ok || i >= len(sm.shards) {
		return nil
	}
	return sm.shards[i]
}

func (st *state) lookupShard(sm *stream, id string) (*shard, *apiError) {
	if sh := sm.shard(id); sh != nil {
		return sh, nil
	}
	return nil, errf(CodeResourceNotFound, "Shard %s in stream %s under account %s does not exist", id, sm.name, st.s.cfg.acct)
}

// openShards returns the open shards in hash key order.
func (sm *stream) openShards() []*shard {
	var out []*shard
	for _, sh := range sm.shards {
		if !sh.closed {
			out = append(out, sh)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Cmp(out[j].start) < 0 })
	return out
}

// shardFor returns the open shard owning hash key k.
func (sm *stream) shardFor(k hashKey) *shard {
	for _, sh := range sm.shards {
		if !sh.closed && sh.start.Cmp(k) <= 0 && k.Cmp(sh.end) <= 0 {
			return sh
		}
	}
	return nil
}

// addShard opens a new shard of sm covering [start, end].
func (st *state) addShard(sm *stream, start, end hashKey, parent, adjacent string, now time.Time) *shard {
	idx := len(sm.shards)
	c := st.nextCounter()
	sh := &shard{
		id:             shardIDFor(idx),
		index:          idx,
		stream:         sm,
		start:          start,
		end:            end,
		startStr:       start.String(),
		endStr:         end.String(),
		parent:         parent,
		adjacentParent: adjacent,
		startCounter:   c,
		startSeq:       formatSeq(c, sm.serial, idx),
		opened:         now.Truncate(time.Millisecond),
	}
	sm.shards = append(sm.shards, sh)
	return sh
}

// closeShard closes sh: it gets its EndingSequenceNumber, and its readers
// wake up to see the end. The caller then opens the children (whose numbers
// start above the parent's end) and sets sh.children, within the same turn of
// the state goroutine.
func (st *state) closeShard(sh *shard, now time.Time) {
	c := st.nextCounter()
	sh.closed = true
	sh.endCounter = c
	sh.endSeq = formatSeq(c, sh.stream.serial, sh.index)
	sh.closedAt = now.Truncate(time.Millisecond)
	sh.wake()
}

func (sh *shard) wake() {
	if sh.notify != nil {
		close(sh.notify)
		sh.notify = nil
	}
}

func (sh *shard) waitChan() <-chan struct{} {
	if sh.notify == nil {
		sh.notify = make(chan struct{})
	}
	return sh.notify
}

// appendRecord stores a record in sh and wakes its readers.
func (st *state) appendRecord(sh *shard, pk string, data []byte, now time.Time) *record {
	arrival := now.Truncate(time.Millisecond)
	if n := len(sh.records); n > 0 && arrival.Before(sh.records[n-1].arrival) {
		arrival = sh.records[n-1].arrival // arrival times never go backwards in a shard
	}
	c := st.nextCounter()
	sh.records = append(sh.records, record{
		counter: c,
		seq:     formatSeq(c, sh.stream.serial, sh.index),
		pk:      pk,
		data:    data,
		arrival: arrival,
	})
	sh.wake()
	return &sh.records[len(sh.records)-1]
}

// parents lists the shard's parents, as ChildShards reports them.
func (sh *shard) parents() []string {
	var out []string
	if sh.parent != "" {
		out = append(out, sh.parent)
	}
	if sh.adjacentParent != "" {
		out = append(out, sh.adjacentParent)
	}
	return out
}

func (sm *stream) consumerByName(name string) *consumer {
	for _, c := range sm.consumers {
		if c.name == name {
			return c
		}
	}
	return nil
}

// lookupConsumerARN resolves a consumer ARN to its stream and consumer.
func (st *state) lookupConsumerARN(arn string) (*consumer, *apiError) {
	streamName, consumerName, ok := st.s.parseConsumerARN(arn)
	if !ok {
		if strings.HasPrefix(arn, "arn:aws:kinesis:") && strings.Contains(arn, "/consumer/") {
			// Well formed, but of another region or account.
			return nil, errf(CodeResourceNotFound, "Consumer %s under account %s not found.", arn, st.s.cfg.acct)
		}
		return nil, errf(CodeInvalidArgument, "Invalid ConsumerARN %s.", arn)
	}
	sm, found := st.streams[streamName]
	if found {
		if c := sm.consumerByName(consumerName); c != nil && c.arn == arn {
			return c, nil
		}
	}
	return nil, errf(CodeResourceNotFound, "Consumer %s under account %s not found.", arn, st.s.cfg.acct)
}

// bucketFor returns the token bucket named key, creating it with rate and
// burst.
func (st *state) bucketFor(key string, rate, burst float64, now time.Time) *bucket {
	b, ok := st.buckets[key]
	if !ok {
		b = newBucket(rate, burst, now)
		st.buckets[key] = b
	}
	return b
}
