package coord

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// localCoordination is the local store shared by the input's streams.
type localCoordination struct{ store checkpoint.Store }

// NewLocal returns the coordination of an instance that reads every shard
// itself, its checkpoints in store (closed by Close).
func NewLocal(store checkpoint.Store) Coordination { return localCoordination{store} }

func (c localCoordination) Stream(st Stream, pos *Positions) Coordinator {
	return &localCoordinator{st: st, store: c.store, pos: pos}
}

func (localCoordination) ClaimRegistration(string, string) func(context.Context) (bool, error) {
	return nil // one instance: nobody to compete with
}

func (localCoordination) DropRegistration(context.Context, string, string) error { return nil }

func (localCoordination) CommitEvery(commitPeriod time.Duration) time.Duration { return commitPeriod }

func (localCoordination) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}

func (c localCoordination) Close() error { return c.store.Close() }

// localCoordinator is the coordinator of a stream read by one instance:
// every shard is its own, and its checkpoints are saved to the store whole.
type localCoordinator struct {
	st    Stream
	store checkpoint.Store
	pos   *Positions
	// saveMu serializes saves, so that a later snapshot is never
	// overwritten by an earlier one.
	saveMu sync.Mutex
	// checked is set once the loaded checkpoints were checked against a
	// listing (owned by the stream's run loop).
	checked bool
}

// load reads the stream's checkpoints. A stream that was deleted and
// created again since they were written starts afresh, loudly.
func (c *localCoordinator) Load(ctx context.Context) (FirstPin, error) {
	st, err := c.store.Load(ctx, c.st.ARN)
	if err != nil {
		return FirstPin{}, fmt.Errorf("loading checkpoints of stream %s: %w", c.st.Name, err)
	}
	recreated := false
	if !st.Created.IsZero() && !c.st.Created.IsZero() && !st.Created.Equal(c.st.Created) {
		c.st.Log.Warnf("stream %s was created at %v, but its checkpoints are of a stream of that name created at %v: it was deleted and created again, so the old checkpoints are dropped and %s",
			c.st.Name, c.st.Created.UTC(), st.Created.UTC(), c.st.RestartsFrom)
		st.Shards = map[string]checkpoint.Checkpoint{}
		recreated = true
	}
	broken := 0
	for id, cp := range st.Shards {
		if _, err := cp.Resume(); err != nil {
			if cp.Broken == nil {
				cp.Broken = fmt.Errorf("checkpoint of stream %s shard %s: %w: %s", c.st.Name, id, err, c.fix(id))
				st.Shards[id] = cp
			}
			broken++ // its reader says so, and waits
		}
	}
	c.st.Metrics.BrokenCheckpoints.Set(int64(broken), c.st.Name)
	st.ARN, st.Created = c.st.ARN, c.st.Created
	c.pos.Replace(st)
	return FirstPin{Due: len(st.Shards) == 0, Start: c.st.StartFor(recreated)}, nil
}

func (c *localCoordinator) Pin(ctx context.Context, shards []Shard, start checkpoint.Start, _ bool) error {
	c.pos.Pin(shards, start)
	return c.Commit(ctx)
}

func (c *localCoordinator) Reset(_ context.Context, created time.Time) error {
	c.pos.Reset(created) // saved by the pin that follows
	return nil
}

// cycle has nothing to decide: every shard is this instance's.
func (c *localCoordinator) Cycle(context.Context, func(string) bool) time.Duration {
	return 24 * time.Hour
}

func (c *localCoordinator) Acquire(shardID string, _ context.CancelCauseFunc) (Grant, bool) {
	cp, ok := c.pos.Of(shardID)
	if !ok {
		return nil, false
	}
	return &localGrant{c: c, shard: shardID, epoch: c.pos.Epoch(), cp: cp}, true
}

// commit saves the checkpoints if anything changed.
func (c *localCoordinator) Commit(ctx context.Context) error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	snap, epoch, ok := c.pos.snapshot()
	if !ok {
		return nil
	}
	if err := c.store.Save(ctx, snap); err != nil {
		c.pos.failed()
		c.st.Metrics.CommitFailures.Incr(1, c.st.Name)
		return fmt.Errorf("stream %s: committing checkpoints: %w", c.st.Name, err)
	}
	c.pos.saved(snap, epoch)
	c.st.Metrics.Commits.Incr(1, c.st.Name)
	c.st.Metrics.OwnedShards.Set(int64(c.pos.Unended()), c.st.Name)
	return nil
}

func (c *localCoordinator) Release(ctx context.Context) error { return c.Commit(ctx) }

func (c *localCoordinator) Changed() <-chan struct{} { return nil } // nothing changes outside cycle

// fix says where a shard's checkpoint is stored and how to set it again.
func (c *localCoordinator) fix(shardID string) string {
	dir, where := "<checkpoint.dir>", "the checkpoint file"
	if f, ok := c.store.(interface{ Path(string) string }); ok {
		path := f.Path(c.st.ARN)
		dir, where = filepath.Dir(path), fmt.Sprintf("checkpoint file %q", path)
	}
	return fmt.Sprintf("it is stored in %s: %s", where, checkpoint.SetCommand(checkpoint.DirFlags(dir), c.st.StreamFlags(), shardID, false))
}

func (c *localCoordinator) Prune(listed map[string]Shard) []string {
	unfinished, _ := c.pos.Prune(listed)
	if c.checked {
		return unfinished
	}
	// The stored checkpoints against the first listing: later ones only
	// hold what this instance's readers set, and an end set after a listing
	// was taken is no contradiction.
	c.checked = true
	for id, cp := range c.pos.Contradicted(listed, c.fix) {
		if cp.Ended { // no reader starts to say so
			c.st.Log.Errorf("stream %s shard %s: not read: %v", c.st.Name, id, cp.Broken)
		}
	}
	c.st.Metrics.BrokenCheckpoints.Set(int64(c.pos.Broken()), c.st.Name)
	return unfinished
}

// localGrant is a reader's grant of the local store: it never lapses, and
// its acknowledgements count while the stream's epoch is the one it was
// given in.
type localGrant struct {
	c     *localCoordinator
	shard string
	epoch int
	cp    checkpoint.Checkpoint
}

func (g *localGrant) Start() checkpoint.Checkpoint { return g.cp }

func (g *localGrant) Acked(pos checkpoint.Position) { g.c.pos.SetPosition(g.shard, pos, g.epoch) }

func (g *localGrant) Ended(ctx context.Context, last *checkpoint.Position) error {
	if !g.c.pos.SetEnded(g.shard, last, g.epoch) {
		return nil
	}
	return g.c.Commit(ctx)
}

func (g *localGrant) Until() time.Time { return Never }

// Read: one instance has nothing to balance.
func (g *localGrant) Read(int, time.Time) {}

// Stopped waits for what the reader handed out to settle, until the
// stream is reset: the old stream's records do not hold the new one's
// readers. The reset may come while it waits: a reset cancels the readers
// first and moves the epoch after, so a reader stopped by it may start
// waiting before the epoch moved (seen on a loaded CI machine: the old
// stream's rejected records, replayed, held the reader of the new stream's
// shard of the same id until the test gave up).
func (g *localGrant) Stopped(ctx context.Context, settled func(context.Context) error) {
	sctx, cancel := context.WithCancel(ctx)
	reset := g.c.pos.ResetAfter(g.epoch)
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-reset:
			cancel()
		case <-sctx.Done():
		}
	})
	_ = settled(sctx)
	cancel()
	wg.Wait()
}
