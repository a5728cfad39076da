package input

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// coordinator decides which shards of one stream this instance reads, keeps
// how far each is acknowledged, and makes that durable. The stream's run
// loop, its shard readers and Close call it and never ask which kind they
// have: the local store (one instance, a checkpoint file; every shard is
// its own) or the lease table (many instances share the stream's shards
// through DynamoDB leases).
//
// Lock order: a coordinator serializes its commits with a mutex of its own,
// taken first; under it, or alone, code holds at most one of the positions'
// lock, the lease book's lock and the lease view's lock, never two of them
// at once. An ack tracker's lock is a leaf: nothing is locked under it.
type coordinator interface {
	// load reads the stream's stored checkpoints into its positions, and
	// says whether the stream's first shards are still to be pinned and
	// where they start.
	load(ctx context.Context) (firstPin, error)
	// pin durably stores where each shard without a checkpoint starts (at
	// start), before any of them is read. first is set for the stream's
	// first pin, which another instance may be making already.
	pin(ctx context.Context, shards []shardInfo, start checkpoint.Start, first bool) error
	// prune brings the checkpoints in line with a listing: shards no
	// longer listed (gone past the retention period) are forgotten. It
	// returns those that had not been read to their end.
	prune(listed map[string]shardInfo) (unfinished []string)
	// reset forgets the stream: it was deleted and created again (at
	// created). Every reader of the old stream is stopped, and nothing it
	// acknowledges later counts.
	reset(ctx context.Context, created time.Time) error
	// cycle decides which shards this instance may read now (taking,
	// asking for and giving up leases), and returns when it wants to
	// decide again. readable tells which known shards may be read at all
	// (listed, not ended, parents ended).
	cycle(ctx context.Context, readable func(shardID string) bool) time.Duration
	// acquire returns the grant under which a shard may be read now: not
	// while another reader of it still runs or its lease is not held.
	acquire(shardID string, stop context.CancelCauseFunc) (grant, bool)
	// commit makes the acknowledged positions durable (and with a lease
	// table keeps the leases: renewals, handovers, fencing).
	commit(ctx context.Context) error
	// release commits and gives every shard up: a clean stop.
	release(ctx context.Context) error
	// changed receives when what may be read changed outside cycle (a
	// lease renewed after a lapse, handed over, or released).
	changed() <-chan struct{}
}

// grant is the right of one reader to read one shard, from start on.
type grant interface {
	// start is the checkpoint the reader starts from.
	start() checkpoint.Checkpoint
	// acked records an acknowledged position: every record up to it is
	// done. It counts while the grant is the shard's current one.
	acked(pos checkpoint.Position)
	// ended records that the shard was read to its end after last (nil:
	// no record acknowledged by this reader), durably on success.
	ended(ctx context.Context, last *checkpoint.Position) error
	// until is when the reader must stop handing out records: its lease
	// lapses then unless renewed. Far in the future with the local store.
	until() time.Time
	// stopped is told once the reader stopped. It waits, as long as the
	// grant needs, for what the reader handed out to be settled
	// (acknowledged or rejected: settled returns nil), then gives the
	// grant up: its acknowledgements no longer count, and another reader
	// of the shard may start after the last acknowledged record.
	stopped(ctx context.Context, settled func(context.Context) error)
}

// firstPin is what load found of the stream's first start.
type firstPin struct {
	due   bool             // the first shards are still to be pinned
	start checkpoint.Start // where they start
}

// never is the lapse of a grant that never lapses.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// streamInfo is what a coordinator knows of its stream.
type streamInfo struct {
	name    string
	arn     string
	created time.Time // zero when unknown (registration none)
	// startFor is where the first shards start: start_from, or for a
	// stream found deleted and created again (recreated) its beginning
	// when start_from is latest.
	startFor func(recreated bool) checkpoint.Start
	// restartsFrom says where a stream found created again is read from.
	restartsFrom string
	log          *service.Logger
	metrics      *metrics
}

// coordination is what the streams of an input share: the checkpoint file
// or the lease table. It makes each stream's coordinator.
type coordination interface {
	stream(st streamInfo, pos *positions) coordinator
	// claimRegistration claims the registration of a fan-out consumer for
	// this instance (see efo.WaitOptions.Claim), or nil when nothing needs
	// claiming; dropRegistration drops the claim once it is registered.
	claimRegistration(streamARN, consumer string) func(context.Context) (bool, error)
	dropRegistration(ctx context.Context, streamARN, consumer string) error
	// commitEvery is how often the commit loop commits.
	commitEvery(commitPeriod time.Duration) time.Duration
	// bound bounds a step of Close: a store that does not answer must not
	// hold the shutdown.
	bound(ctx context.Context) (context.Context, context.CancelFunc)
	close() error
}

// coordinationConfig is the parsed checkpoint configuration: the local
// store's or the lease table's.
type coordinationConfig interface {
	// check refuses at start what can never serve (an unusable directory,
	// a missing table), rather than Connect retrying it for ever.
	check(conf config) error
	// open opens the store or the table.
	open(ctx context.Context, cfg aws.Config, conf config, log *service.Logger) (coordination, error)
}

// errNotHandedOut resolves a tracked batch that never reached the pipeline
// (its reader stopped while it waited): like a rejection, the checkpoint
// stays before it, and nobody waits for its acknowledgement.
var errNotHandedOut = errors.New("the batch was never handed to the pipeline")
