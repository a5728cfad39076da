package kinesisfake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// faults holds the injected faults. Like stats it belongs to the harness, not
// to the fake Kinesis state, and has its own lock. Each kind of fault has its
// own queue per operation, so "fail the next 2 calls" and "delay the next
// call" both apply to the first call. A call is delayed first, then dropped or
// failed; a dropped call does not use up a queued failure.
type faults struct {
	mu       sync.Mutex
	fail     map[string][]*countedFault
	delay    map[string][]*countedFault
	drop     map[string]int
	controls []*control
	subs     []*subFault
}

type countedFault struct {
	n    int
	code string
	d    time.Duration
}

type control struct {
	op string
	fn func(*Request) (handled bool, status int, body []byte)
}

// Request is what a Control function sees of a call.
type Request struct {
	Op     string      // operation name, e.g. "GetRecords"
	Proto  string      // "HTTP/1.1" or "HTTP/2.0"
	Header http.Header // request headers; do not modify
	Body   []byte      // the JSON request body; do not modify
}

// FailNext makes the next n calls of op answer with the AWS error code (e.g.
// "ProvisionedThroughputExceededException", "InternalFailureException",
// "ServiceUnavailable"), with HTTP status 500 for InternalFailureException,
// 503 for ServiceUnavailable and 400 otherwise. For SubscribeToShard the error
// is an HTTP error before the event stream starts.
func (s *Server) FailNext(op string, n int, code string) {
	s.faults.push(&s.faults.fail, op, &countedFault{n: n, code: code})
}

// DelayNext makes the next n calls of op wait d before they are served (the
// wait ends early if the client goes away or the server closes).
func (s *Server) DelayNext(op string, n int, d time.Duration) {
	s.faults.push(&s.faults.delay, op, &countedFault{n: n, d: d})
}

// DropNext makes the next n calls of op end without an answer: over HTTP/1.1
// the connection is closed; over HTTP/2 the stream is reset (RST_STREAM) and
// the connection stays up.
func (s *Server) DropNext(op string, n int) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.drop == nil {
		s.faults.drop = map[string]int{}
	}
	s.faults.drop[op] += n
}

// Control installs fn for every call of op ("" for every operation), before
// any other fault and before the call is served. If fn reports handled, the
// call is answered with status and body (JSON; for an error status the body's
// "__type" also goes into X-Amzn-ErrorType) and goes no further. Controls run
// in the order they were installed, on the request's goroutine; fn must be
// safe for concurrent use. The returned function removes the control.
func (s *Server) Control(op string, fn func(*Request) (handled bool, status int, body []byte)) (remove func()) {
	c := &control{op: op, fn: fn}
	s.faults.mu.Lock()
	s.faults.controls = append(s.faults.controls, c)
	s.faults.mu.Unlock()
	return func() {
		s.faults.mu.Lock()
		defer s.faults.mu.Unlock()
		for i, x := range s.faults.controls {
			if x == c {
				s.faults.controls = append(s.faults.controls[:i:i], s.faults.controls[i+1:]...)
				return
			}
		}
	}
}

// ErrorBody returns the status and body AWS answers for an error code, for
// Control functions.
func ErrorBody(code, message string) (status int, body []byte) {
	body, _ = json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{code, message})
	return statusFor(code), body
}

func (f *faults) push(m *map[string][]*countedFault, op string, cf *countedFault) {
	if cf.n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if *m == nil {
		*m = map[string][]*countedFault{}
	}
	(*m)[op] = append((*m)[op], cf)
}

// take consumes one use of the first fault queued for op.
func (f *faults) take(m map[string][]*countedFault, op string) (countedFault, bool) {
	q := m[op]
	if len(q) == 0 {
		return countedFault{}, false
	}
	cf := *q[0]
	q[0].n--
	if q[0].n <= 0 {
		m[op] = q[1:]
	}
	return cf, true
}

// injectFaults applies the faults set for c.op. It reports whether the call
// was answered (or dropped) and must go no further.
func (s *Server) injectFaults(w http.ResponseWriter, c *call) bool {
	s.faults.mu.Lock()
	var ctrls []*control
	for _, x := range s.faults.controls {
		if x.op == "" || x.op == c.op {
			ctrls = append(ctrls, x)
		}
	}
	s.faults.mu.Unlock()
	if len(ctrls) > 0 {
		req := &Request{Op: c.op, Proto: c.proto, Header: c.header, Body: c.body}
		for _, x := range ctrls {
			if handled, status, body := x.fn(req); handled {
				writeControlled(w, c, status, body)
				return true
			}
		}
	}

	s.faults.mu.Lock()
	delay, delayed := s.faults.take(s.faults.delay, c.op)
	s.faults.mu.Unlock()
	if delayed {
		t := time.NewTimer(delay.d)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return true
		case <-s.closing:
			t.Stop()
			return true
		}
	}

	s.faults.mu.Lock()
	dropped := s.faults.drop[c.op] > 0
	if dropped {
		s.faults.drop[c.op]--
	}
	var fail countedFault
	var failed bool
	if !dropped { // a dropped call leaves queued failures for the next call
		fail, failed = s.faults.take(s.faults.fail, c.op)
	}
	s.faults.mu.Unlock()
	if dropped {
		dropConnection(w)
		return true
	}
	if failed {
		writeError(w, errf(fail.code, "Injected fault for %s.", c.op))
		return true
	}
	return false
}

func writeControlled(w http.ResponseWriter, c *call, status int, body []byte) {
	if status == 0 {
		status = http.StatusOK
	}
	c.grace(len(body))
	h := w.Header()
	h.Set("Content-Type", jsonType)
	if status >= 400 {
		var e struct {
			Type string `json:"__type"`
		}
		if json.Unmarshal(body, &e) == nil && e.Type != "" {
			h.Set("X-Amzn-ErrorType", e.Type)
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// dropConnection ends the call without an answer: an HTTP/1.1 connection is
// hijacked and closed; an HTTP/2 stream is reset by aborting the handler.
func dropConnection(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// Subscription faults.

type subFaultKind int

const (
	subDrop subFaultKind = iota
	subStall
	subException
)

type subFault struct {
	kind  subFaultKind
	shard string // "" matches any shard
	n     int
	after int // events sent (not counting initial-response) before the fault
	stall time.Duration
	code  string
}

// DropSubscriptionAfter makes the next n successful subscriptions to shardID
// ("" for any shard) lose their connection after k events (k = 0: right after
// the initial-response), as DropNext does.
func (s *Server) DropSubscriptionAfter(shardID string, n, k int) {
	s.faults.pushSub(&subFault{kind: subDrop, shard: shardID, n: n, after: k})
}

// StallSubscriptionAfter makes the next n successful subscriptions to shardID
// ("" for any shard) send nothing for d after k events, not even heartbeats,
// while the connection stays open; then they carry on.
func (s *Server) StallSubscriptionAfter(shardID string, n, k int, d time.Duration) {
	s.faults.pushSub(&subFault{kind: subStall, shard: shardID, n: n, after: k, stall: d})
}

// FailSubscriptionAfter makes the next n successful subscriptions to shardID
// ("" for any shard) send an exception frame with the error code after k
// events, then end the stream.
func (s *Server) FailSubscriptionAfter(shardID string, n, k int, code string) {
	s.faults.pushSub(&subFault{kind: subException, shard: shardID, n: n, after: k, code: code})
}

func (f *faults) pushSub(sf *subFault) {
	if sf.n <= 0 {
		return
	}
	f.mu.Lock()
	f.subs = append(f.subs, sf)
	f.mu.Unlock()
}

// takeSub consumes one use of the first subscription fault matching shardID.
// A subscription gets at most one fault.
func (f *faults) takeSub(shardID string) *subFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, sf := range f.subs {
		if sf.shard != "" && sf.shard != shardID {
			continue
		}
		out := *sf
		sf.n--
		if sf.n <= 0 {
			f.subs = append(f.subs[:i:i], f.subs[i+1:]...)
		}
		return &out
	}
	return nil
}
