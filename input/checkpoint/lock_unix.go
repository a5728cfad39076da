//go:build unix

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking advisory lock on path. The kernel
// drops it when the process dies, so a crash never leaves a stale lock.
func lockFile(path string) (*os.File, error) {
	l, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint lock %q: %w", path, err)
	}
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		l.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("checkpoint lock %q is %w: the local checkpoint store serves one instance at a time", path, ErrLocked)
		}
		return nil, fmt.Errorf("locking %q: %w", path, err)
	}
	return l, nil
}

func unlockFile(l *os.File) error {
	return l.Close() // closing the descriptor releases the flock
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openNonBlocking opens path for reading without waiting for a writer, should
// it be a FIFO.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
