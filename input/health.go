package input

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Whether the input can read at all. Benthos's /ready answers false while
// an input is not connected: when no stream can be read (every shard it
// would read stopped on a position the shard cannot hold or on stored
// state that cannot be read, or its shards cannot be listed, or its
// checkpoints stored (a lease table out of reach), for a while with no
// reader left), ReadBatch says the input is not connected, and
// Connect answers, until something can be read again, with an error that
// says why (Benthos logs it at ERROR each time it tries).

const (
	// healthEvery is how often the input looks.
	healthEvery = time.Second
	// reconnectWait is how long Connect waits for a stream to become
	// readable before it answers with why none is.
	reconnectWait = 5 * time.Second
)

// inputHealth is the input's verdict, looked at every healthEvery.
type inputHealth struct {
	mu  sync.Mutex
	why string // "" while something can be read
	// down is signalled when the input turns unreadable.
	down chan struct{}
}

func newInputHealth() *inputHealth { return &inputHealth{down: make(chan struct{}, 1)} }

func (h *inputHealth) reason() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.why
}

func (h *inputHealth) set(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if why != "" && h.why == "" {
		select {
		case h.down <- struct{}{}:
		default:
		}
	}
	h.why = why
}

// watchHealth looks every healthEvery whether any stream can be read.
func (in *kinesisInput) watchHealth(ctx context.Context, streams []*stream) {
	tick := time.NewTicker(healthEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			var whys []string
			for _, s := range streams {
				why := s.Unreadable(now)
				if why == "" {
					whys = nil
					break
				}
				whys = append(whys, why)
			}
			in.health.set(strings.Join(whys, "; "))
		}
	}
}

// errUnreadable is what Connect answers while no stream can be read.
var errUnreadable = errors.New("the input cannot read anything")

// awaitReadable waits, in a Connect after ReadBatch said the input is not
// connected, until a stream can be read again: nil then, or, after
// reconnectWait, an error that says why none can.
func (in *kinesisInput) awaitReadable(ctx context.Context) error {
	deadline := time.NewTimer(reconnectWait)
	defer deadline.Stop()
	tick := time.NewTicker(healthEvery / 4)
	defer tick.Stop()
	for {
		why := in.health.reason()
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-in.ctx.Done():
			return service.ErrEndOfInput
		case <-deadline.C:
			return fmt.Errorf("%w: %s", errUnreadable, why)
		case <-tick.C:
		}
	}
}
