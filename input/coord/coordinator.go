// Package coord is what the input's stream and shard readers ask about the
// shards of a stream: which ones this instance may read, from where, and
// what becomes of what they acknowledge. A Coordinator answers for one
// stream; the readers never ask which kind they have. Two kinds exist: the
// local store of one instance (NewLocal, in this package) and the lease
// table shared by many (package leasecoord).
//
// Dependencies flow one way: the input (the Benthos component, stream and
// shard reading) uses this package and leasecoord; they use the stores
// (input/checkpoint, input/lease); none of them knows the input.
//
// Lock order: a coordinator serializes its commits with a mutex of its own,
// taken first; under it, or alone, code holds at most one of the
// positions' lock and a coordinator's own state locks, never two of them at
// once. The readers' locks (ack trackers, room ledgers) are taken under
// none of these, and take none of them (see package read for their order).
package coord

import (
	"context"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// Coordinator decides which shards of one stream this instance reads, keeps
// how far each is acknowledged, and makes that durable.
type Coordinator interface {
	// Load reads the stream's stored checkpoints into its positions, and
	// says whether the stream's first shards are still to be pinned and
	// where they start.
	Load(ctx context.Context) (FirstPin, error)
	// Prune brings the checkpoints in line with a listing: shards no
	// longer listed (gone past the retention period) are forgotten. It
	// returns those that had not been read to their end.
	Prune(listed map[string]Shard) (unfinished []string)
	// Reset forgets the stream: it was deleted and created again (at
	// created). Every reader of the old stream is stopped, and nothing it
	// acknowledges later counts.
	Reset(ctx context.Context, created time.Time) error
	// Pin durably stores where each shard without a checkpoint starts (at
	// start), before any of them is read. first is set for the stream's
	// first pin, which another instance may be making already. While the
	// last pin (or a Reset) failed, the stream starts no reader, so Cycle
	// takes no lease: another instance reads it meanwhile.
	Pin(ctx context.Context, shards []Shard, start checkpoint.Start, first bool) error
	// Cycle decides which shards this instance may read now (taking,
	// asking for and giving up leases), and returns when it wants to
	// decide again. readable tells which known shards may be read at all
	// (listed, parents ended).
	Cycle(ctx context.Context, readable func(shardID string) bool) time.Duration
	// Acquire returns the grant under which a shard may be read now: not
	// while another reader of it still runs or its lease is not held.
	// stop stops the reader (with a cause) when the grant ends early.
	Acquire(shardID string, stop context.CancelCauseFunc) (Grant, bool)
	// Commit makes the acknowledged positions durable (and with a lease
	// table keeps the leases: renewals, handovers, fencing).
	Commit(ctx context.Context) error
	// Release commits and gives every shard up: a clean stop.
	Release(ctx context.Context) error
	// Changed receives when what may be read changed outside Cycle (a
	// lease renewed after a lapse, or its handover withdrawn).
	Changed() <-chan struct{}
}

// Grant is the right of one reader to read one shard, from Start on.
type Grant interface {
	// Start is the checkpoint the reader starts from.
	Start() checkpoint.Checkpoint
	// Acked records an acknowledged position: every record up to it is
	// done. It counts while the grant is the shard's current one.
	Acked(pos checkpoint.Position)
	// Ended records that the shard was read to its end after last (nil:
	// no record acknowledged by this reader), durably on success.
	Ended(ctx context.Context, last *checkpoint.Position) error
	// Read records bytes of the shard's records read, the newest of which
	// arrived in the shard at arrived (zero: unknown, or bytes 0: a read
	// at the tip found nothing new): the shard's load, which a
	// coordinator that balances by load weighs. The load is the rate
	// records arrive at, not the rate they are read at, which pauses and
	// bursts with the reader.
	Read(bytes int, arrived time.Time)
	// Until is when the reader must stop handing out records: its lease
	// lapses then unless renewed. Never, with the local store.
	Until() time.Time
	// Stopped is told once the reader stopped. It waits, as long as the
	// grant needs, for what the reader handed out to be settled
	// (acknowledged or rejected: settled returns nil), then gives the
	// grant up: its acknowledgements no longer count, and another reader
	// of the shard may start after the last acknowledged record.
	Stopped(ctx context.Context, settled func(context.Context) error)
}

// Coordination is what the streams of an input share: the checkpoint file
// or the lease table. It makes each stream's coordinator.
type Coordination interface {
	Stream(st Stream, pos *Positions) Coordinator
	// ClaimRegistration claims the registration of a fan-out consumer for
	// this instance (see efo.WaitOptions.Claim), or is nil when nothing
	// needs claiming; DropRegistration drops the claim once it is
	// registered.
	ClaimRegistration(streamARN, consumer string) func(context.Context) (bool, error)
	DropRegistration(ctx context.Context, streamARN, consumer string) error
	// CommitEvery is how often the input commits, given commit_period.
	CommitEvery(commitPeriod time.Duration) time.Duration
	// Bound bounds a step of Close: a store that does not answer must not
	// hold the shutdown.
	Bound(ctx context.Context) (context.Context, context.CancelFunc)
	Close() error
}

// FirstPin is what Load found of the stream's first start.
type FirstPin struct {
	Due   bool             // the first shards are still to be pinned
	Start checkpoint.Start // where they start
}

// Shard is a shard as a coordinator knows it.
type Shard struct {
	ID       string
	StartSeq string   // its starting sequence number, when listed
	EndSeq   string   // its ending sequence number, when listed closed
	Listed   bool     // by ListShards (not only learnt from a parent's end)
	Parents  []string // zero, one (split) or two (merge) shard ids
}

// ReportAgain is how often a shard left unread until an operator sets its
// checkpoint again is reported again while it stays so.
const ReportAgain = 5 * time.Minute

// Never is the lapse of a grant that never lapses.
var Never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Stream is what a coordinator knows of its stream.
type Stream struct {
	Name    string
	ARN     string
	Created time.Time // zero when unknown (registration none)
	// StartFor is where the first shards start: start_from, or for a
	// stream found deleted and created again (recreated) its beginning
	// when start_from is latest.
	StartFor func(recreated bool) checkpoint.Start
	// RestartsFrom says where a stream found created again is read from.
	RestartsFrom string
	// CommandFlags point the checkpoint command at the stream and at how
	// to reach it (checkpoint.StreamFlags), for the fixes messages name;
	// empty: its name alone (see StreamFlags).
	CommandFlags string
	Log          *service.Logger
	Metrics      *Metrics
}

// StreamFlags point the checkpoint command at the stream: CommandFlags, or
// its name.
func (s Stream) StreamFlags() string {
	if s.CommandFlags != "" {
		return s.CommandFlags
	}
	return checkpoint.StreamFlags(s.Name)
}
