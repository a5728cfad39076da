package kinesisfake

import "sync"

// stats counts calls and throttles per operation. It belongs to the test
// harness rather than to the fake Kinesis state, so it has its own lock.
type stats struct {
	mu        sync.Mutex
	calls     map[string]int
	throttled map[string]int
	noARN     map[string]int
}

func (st *stats) call(op string) {
	st.mu.Lock()
	if st.calls == nil {
		st.calls = map[string]int{}
	}
	st.calls[op]++
	st.mu.Unlock()
}

func (st *stats) throttle(op string, n int) {
	st.mu.Lock()
	if st.throttled == nil {
		st.throttled = map[string]int{}
	}
	st.throttled[op] += n
	st.mu.Unlock()
}

func (st *stats) withoutARN(op string) {
	st.mu.Lock()
	if st.noARN == nil {
		st.noARN = map[string]int{}
	}
	st.noARN[op]++
	st.mu.Unlock()
}

// CallsWithoutARN returns how many requests for op were refused because
// they did not name the stream by its ARN (see OtherAccount).
func (s *Server) CallsWithoutARN(op string) int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.noARN[op]
}

// Calls returns how many requests for op the server has received, including
// those that failed, were throttled or had a fault injected.
func (s *Server) Calls(op string) int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.calls[op]
}

// Throttled returns how many requests for op were rejected by a quota
// (LimitExceededException or ProvisionedThroughputExceededException). For
// PutRecords it counts rejected entries. Injected faults are not counted.
func (s *Server) Throttled(op string) int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.throttled[op]
}
