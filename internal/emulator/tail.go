package emulator

import "sync"

// tailBuffer is an io.Writer that keeps only the last max bytes written to it.
// It collects an emulator's or npm's output so that a failure can show what the
// process said last without holding all of it. Safe for concurrent use.
type tailBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

const defaultTail = 16 << 10

func newTailBuffer(max int) *tailBuffer {
	return &tailBuffer{max: max}
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) >= b.max {
		p = p[len(p)-b.max:]
		b.buf = b.buf[:0]
		b.truncated = true
	} else if over := len(b.buf) + len(p) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// String returns the kept output, marked when older output was dropped.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		return "(no output)"
	}
	if b.truncated {
		return "[...]" + string(b.buf)
	}
	return string(b.buf)
}
