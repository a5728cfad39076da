package input

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// fileConfig is checkpoint.dir: one instance, its checkpoints in a file.
type fileConfig struct{ Dir string }

func (f fileConfig) check(conf config) error {
	// A directory that can never serve stops the binary at start with its
	// message, rather than Connect retrying it for ever.
	if err := checkpoint.CheckDir(f.Dir); err != nil {
		return fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	var streams []string
	for _, ref := range conf.Streams {
		streams = append(streams, ref.String())
	}
	if err := checkpoint.CheckLocks(f.Dir, streams); err != nil {
		return fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	return nil
}

func (f fileConfig) open(_ context.Context, _ aws.Config, _ config, _ *service.Logger) (coordination, error) {
	store, err := checkpoint.OpenFile(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	return localCoordination{store}, nil
}

// localCoordination is the local store shared by the input's streams.
type localCoordination struct{ store checkpoint.Store }

func (c localCoordination) stream(st streamInfo, pos *positions) coordinator {
	return &localCoordinator{st: st, store: c.store, pos: pos}
}

func (localCoordination) claimRegistration(string, string) func(context.Context) (bool, error) {
	return nil // one instance: nobody to compete with
}

func (localCoordination) dropRegistration(context.Context, string, string) error { return nil }

func (localCoordination) commitEvery(commitPeriod time.Duration) time.Duration { return commitPeriod }

func (localCoordination) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}

func (c localCoordination) close() error { return c.store.Close() }

// localCoordinator is the coordinator of a stream read by one instance:
// every shard is its own, and its checkpoints are saved to the store whole.
type localCoordinator struct {
	st    streamInfo
	store checkpoint.Store
	pos   *positions
	// saveMu serializes saves, so that a later snapshot is never
	// overwritten by an earlier one.
	saveMu sync.Mutex
}

// load reads the stream's checkpoints. A stream that was deleted and
// created again since they were written starts afresh, loudly.
func (c *localCoordinator) load(ctx context.Context) (firstPin, error) {
	st, err := c.store.Load(ctx, c.st.arn)
	if err != nil {
		return firstPin{}, fmt.Errorf("loading checkpoints of stream %s: %w", c.st.name, err)
	}
	recreated := false
	if !st.Created.IsZero() && !c.st.created.IsZero() && !st.Created.Equal(c.st.created) {
		c.st.log.Warnf("stream %s was created at %v, but its checkpoints are of a stream of that name created at %v: it was deleted and created again, so the old checkpoints are dropped and %s",
			c.st.name, c.st.created.UTC(), st.Created.UTC(), c.st.restartsFrom)
		st.Shards = map[string]checkpoint.Checkpoint{}
		recreated = true
	}
	for id, cp := range st.Shards {
		if _, err := cp.Resume(); err != nil {
			return firstPin{}, fmt.Errorf("checkpoint of stream %s shard %s: %w: restore the checkpoint file, or delete it to start again from start_from", c.st.name, id, err)
		}
	}
	st.ARN, st.Created = c.st.arn, c.st.created
	c.pos.replace(st)
	return firstPin{due: len(st.Shards) == 0, start: c.st.startFor(recreated)}, nil
}

func (c *localCoordinator) pin(ctx context.Context, shards []shardInfo, start checkpoint.Start, _ bool) error {
	c.pos.pin(shards, start)
	return c.commit(ctx)
}

func (c *localCoordinator) reset(_ context.Context, created time.Time) error {
	c.pos.reset(created) // saved by the pin that follows
	return nil
}

// cycle has nothing to decide: every shard is this instance's.
func (c *localCoordinator) cycle(context.Context, func(string) bool) time.Duration {
	return 24 * time.Hour
}

func (c *localCoordinator) acquire(shardID string, _ context.CancelCauseFunc) (grant, bool) {
	cp, ok := c.pos.of(shardID)
	if !ok {
		return nil, false
	}
	return &localGrant{c: c, shard: shardID, epoch: c.pos.current(), cp: cp}, true
}

// commit saves the checkpoints if anything changed.
func (c *localCoordinator) commit(ctx context.Context) error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	snap, epoch, ok := c.pos.snapshot()
	if !ok {
		return nil
	}
	if err := c.store.Save(ctx, snap); err != nil {
		c.pos.failed()
		c.st.metrics.commitFailures.Incr(1, c.st.name)
		return fmt.Errorf("stream %s: committing checkpoints: %w", c.st.name, err)
	}
	c.pos.saved(snap, epoch)
	c.st.metrics.commits.Incr(1, c.st.name)
	c.st.metrics.ownedShards.Set(int64(c.pos.unended()), c.st.name)
	return nil
}

func (c *localCoordinator) release(ctx context.Context) error { return c.commit(ctx) }

func (c *localCoordinator) changed() <-chan struct{} { return nil } // nothing changes outside cycle

func (c *localCoordinator) prune(listed map[string]shardInfo) []string {
	unfinished, _ := c.pos.prune(listed)
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

func (g *localGrant) start() checkpoint.Checkpoint { return g.cp }

func (g *localGrant) acked(pos checkpoint.Position) { g.c.pos.setPosition(g.shard, pos, g.epoch) }

func (g *localGrant) ended(ctx context.Context, last *checkpoint.Position) error {
	if !g.c.pos.setEnded(g.shard, last, g.epoch) {
		return nil
	}
	return g.c.commit(ctx)
}

func (g *localGrant) until() time.Time { return never }

// stopped waits for what the reader handed out to settle, unless the
// stream was reset since: the old stream's records do not hold the new
// one's readers.
func (g *localGrant) stopped(ctx context.Context, settled func(context.Context) error) {
	if g.epoch == g.c.pos.current() {
		settled(ctx)
	}
}
