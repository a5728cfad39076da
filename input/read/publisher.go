package read

import (
	"context"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Publisher reads one shard of one stream: the seam between the readers,
// which own all policy (positions, acknowledgements, resharding), and the two
// ways of reading Kinesis, polling.Publisher and efo.Publisher.
//
// Read delivers the shard's records from start, in order and without gaps, to
// deliver. It returns nil once it has delivered a batch with End set, ctx.Err()
// when ctx ends, the error of deliver, or an error that retrying will not heal
// (the input then retries the shard later from after the last record delivered).
type Publisher interface {
	Read(ctx context.Context, shardID string, start shard.Start, room shard.Room, deliver shard.Deliver) error
}
