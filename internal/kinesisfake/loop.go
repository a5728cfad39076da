package kinesisfake

import "time"

// The state goroutine owns the state: HTTP handlers and helpers hand it
// closures over s.reqs and wait for them to finish. Nothing in a closure may
// block; a subscription that finds no records gets a channel to wait on
// outside the goroutine instead.

func (s *Server) runLoop() {
	defer close(s.loopDone)
	for {
		select {
		case fn := <-s.reqs:
			fn()
		case <-s.stopLoop:
			return
		}
	}
}

// do runs fn on the state goroutine with the current time and waits for it.
// It returns ErrClosed if the state goroutine has stopped.
func (s *Server) do(fn func(st *state, now time.Time)) error {
	done := make(chan struct{})
	req := func() {
		now := s.now()
		s.st.sweep(now)
		fn(s.st, now)
		close(done)
	}
	select {
	case s.reqs <- req:
	case <-s.loopDone:
		return ErrClosed
	}
	<-done
	return nil
}

// now is the time the state works with: time.Now, or the tests' clock.
func (s *Server) now() time.Time {
	if s.cfg.clock != nil {
		return s.cfg.clock()
	}
	return time.Now()
}

// doErr is do for closures that answer with an API error.
func (s *Server) doErr(fn func(st *state, now time.Time) *apiError) error {
	var aerr *apiError
	if err := s.do(func(st *state, now time.Time) { aerr = fn(st, now) }); err != nil {
		return err
	}
	if aerr != nil {
		return aerr
	}
	return nil
}
