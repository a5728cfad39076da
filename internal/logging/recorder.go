package logging

import (
	"fmt"
	"slices"
	"sync"
)

// Recorder is a Logger that keeps the warnings logged to it and drops the
// rest: tests of the publishers read what an operator would be told.
type Recorder struct {
	NopLogger
	mu    sync.Mutex
	warns []string
}

// Warnf keeps a warning.
func (r *Recorder) Warnf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warns = append(r.warns, fmt.Sprintf(format, args...))
}

// Warnings returns the warnings kept so far, in order.
func (r *Recorder) Warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.warns)
}
