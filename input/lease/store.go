package lease

import "context"

// Store is a lease table as the input uses it. *Table keeps it in DynamoDB;
// *Memory keeps it in memory, with the same conditions, counters and
// errors (ErrLost, ErrWithdrawn, ErrDuplicateInstance), for tests of the
// input's lease policy that run without an emulator. Each method's contract
// is the doc comment of the *Table method of its name.
type Store interface {
	// Name names the table in messages.
	Name() string

	// Reads.
	Scan(ctx context.Context, streamARN string) (Scan, error)
	ScanConsistent(ctx context.Context, streamARN string) (Scan, error)
	Get(ctx context.Context, streamARN, shardID string) (Shard, bool, error)

	// Shard items: the lease and its checkpoint.
	Create(ctx context.Context, s Shard) (got Shard, created bool, err error)
	Announce(ctx context.Context, streamARN string, shardIDs []string)
	Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w Write) (Shard, error)
	Take(ctx context.Context, s Shard, me, nonce string) (Shard, error)
	Ask(ctx context.Context, s Shard, me, nonce string) error
	Withdraw(ctx context.Context, s Shard, me string) error
	Delete(ctx context.Context, streamARN, shardID string) error
	Replace(ctx context.Context, s Shard, was string) error
	Overwrite(ctx context.Context, s Shard, prev *Shard) error
	ReplaceMalformed(ctx context.Context, was BrokenItem, s *Shard) error

	// Stream items.
	PutStream(ctx context.Context, s Stream) (Stream, bool, error)
	ReplaceStream(ctx context.Context, s Stream) error

	// Worker items: the presence of instances.
	Heartbeat(ctx context.Context, streamARN, me string, p Presence, takeOver bool) error
	GetWorker(ctx context.Context, streamARN, id string) (Worker, bool, error)
	RemoveWorker(ctx context.Context, streamARN string, seen Worker) (removed bool, err error)
	Leave(ctx context.Context, streamARN, me string) error

	// The roster: the beats of the instances, and what a cycle reads.
	Poll(ctx context.Context, streamARN string) (Poll, error)
	Beat(ctx context.Context, streamARN, me string, b Beat, takeOver bool) (Beat, error)
	GetBeat(ctx context.Context, streamARN string, bucket int, id string) (Beat, bool, error)
	RemoveBeat(ctx context.Context, streamARN string, seen Beat) (bool, error)
	LeaveRoster(ctx context.Context, streamARN, me string, bucket int) error

	// Registration items: who registers a stream consumer.
	ClaimRegistration(ctx context.Context, streamARN, consumer, me string) (bool, error)
	DropRegistration(ctx context.Context, streamARN, consumer string) error
}

var (
	_ Store = (*Table)(nil)
	_ Store = (*Memory)(nil)
)
