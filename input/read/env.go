package read

import (
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
)

// Env is everything the readers of one input share, built once by the
// component from its configuration: the readers know nothing else of it.
type Env struct {
	Log     *service.Logger
	Metrics *Metrics
	// Out takes the readers' batches to the component's ReadBatch.
	Out chan<- Delivery
	// Budget bounds the bytes of records in flight across every shard
	// (memory_limit); nil: no limit. Each shard reader is one of its
	// members.
	Budget *membudget.Budget
	// Batching is the input's batch policy (each shard reader runs its own
	// batcher, built from Resources); empty: batches as read, joined while
	// they wait.
	Batching  service.BatchPolicy
	Resources *service.Resources
	Limits    Limits
	Start     Start
	// Coord decides which shards this instance reads and stores their
	// positions: the checkpoint file, or the lease table.
	Coord coord.Coordination
	Store Store
}

// Limits are the reading settings of the input.
type Limits struct {
	// Checkpoint is checkpoint.limit: the most records of a shard handed
	// out and not yet acknowledged.
	Checkpoint int
	// StrictOrder hands out a shard's next batch only once its previous one
	// is resolved (strict_order).
	StrictOrder bool
	// ReplayNacks: rejected batches come again (auto_replay_nacks).
	ReplayNacks bool
	// Deaggregate splits KPL aggregated records into their user records.
	Deaggregate bool
	// Discovery is how often a stream's shards are listed
	// (shard_discovery_interval).
	Discovery time.Duration
	// Placement is how often, at most, a discovery describes the stream
	// again to learn how it places records (see placement.go); zero: at
	// every discovery.
	Placement time.Duration
}

// Start is where the shards of the input's very first start are read from
// (start_from).
type Start struct {
	// Name is start_from as configured, for what the log says.
	Name string
	// Latest: records that arrive after the input first saw the stream.
	Latest bool
	// At, when not zero: records that arrived at or after it. Neither:
	// the oldest records the stream keeps.
	At time.Time
}

// Store tells the readers where positions are kept, for what they say when
// one cannot be read from.
type Store struct {
	// Where names the store: "directory /x", "lease table t group g".
	Where string
	// EmptyHint is added when a stream's positions are not found: what may
	// be why (a group reads only its own); "" for none.
	EmptyHint string
	// StreamFlags point the checkpoint command at a stream as the input
	// reaches it.
	StreamFlags func(streamARN string) string
	// SetCommand is the command that sets a shard's checkpoint.
	SetCommand func(streamARN, shardID string) string
}

// shardLog words a shard reader's log lines: each is said of its stream and
// shard, in the text ("stream s shard i: ...") and as fields.
type shardLog struct {
	log    *service.Logger
	prefix string // "stream s shard i: ", its % doubled
}

func newShardLog(log *service.Logger, stream, shardID string) shardLog {
	return shardLog{
		log:    log.With("stream", stream, "shard", shardID),
		prefix: strings.ReplaceAll("stream "+stream+" shard "+shardID+": ", "%", "%%"),
	}
}

func (l shardLog) Debugf(format string, args ...any) { l.log.Debugf(l.prefix+format, args...) }
func (l shardLog) Infof(format string, args ...any)  { l.log.Infof(l.prefix+format, args...) }
func (l shardLog) Warnf(format string, args ...any)  { l.log.Warnf(l.prefix+format, args...) }
func (l shardLog) Errorf(format string, args ...any) { l.log.Errorf(l.prefix+format, args...) }
