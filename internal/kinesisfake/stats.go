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

func (st *stats) call(op string)            { st.add(&st.calls, op, 1) }
func (st *stats) throttle(op string, n int) { st.add(&st.throttled, op, n) }
func (st *stats) withoutARN(op string)      { st.add(&st.noARN, op, 1) }

// add counts n of op in the map *m, made on first use.
func (st *stats) add(m *map[string]int, op string, n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[op] += n
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
