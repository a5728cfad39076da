package main

import (
	"fmt"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// TestSIGKILLInsideMixedKeyAggregates is TestSIGKILLInsideAggregate with
// aggregates written as the kinesis-aggregation libraries write them: user
// records of many partition keys and no explicit hash key, the aggregate
// routed by one explicit hash key, so that most user records hash outside the
// shard that stores them. On streams of 2 and of 4 shards, by polling and by
// fan-out, the binary is killed inside an aggregate and restarted: every user
// record arrives, none at or before the checkpoint at the kill comes again,
// each run keeps each partition key's order within a shard, and the lines
// the binary writes flag kinesis_hash_key_out_of_range on exactly the user
// records whose partition key hashes outside their shard's range. (Before the
// input delivered such records it dropped them, as KCL does: they exist in no
// other shard, so they were lost.)
func TestSIGKILLInsideMixedKeyAggregates(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t) // one emulator, a stream per subtest
	for _, shards := range []int32{2, 4} {
		for _, reader := range []string{"polling", "efo"} {
			t.Run(fmt.Sprintf("%d shards %s", shards, reader), func(t *testing.T) {
				t.Parallel()
				stream := fmt.Sprintf("mixed-%d-%s", shards, reader)
				client := k.Client()
				inputtest.CreateStream(t, client, stream, shards)
				prod := inputtest.ProduceAggregated(t, client, stream, "u", inputtest.AggregateMix{
					Aggregates: 60, MinUsers: 50, MaxUsers: 50, Style: inputtest.MixedKeysStyle, Seed: uint64(shards),
				})
				plan, stalled := stallInsideAggregate(k.StreamARN(stream))
				plan.stream, plan.efo, plan.keysInManyShards = stream, reader == "efo", true
				// The test means something only if the records written, and
				// those of the stalled aggregate that the restart resumes
				// with, hold both kinds.
				requireBothKinds(t, prod.Placed, "u-0000000", "u-9999999")
				requireBothKinds(t, prod.Placed, "u-0000775", "u-0000799")

				atKill, all := killAndRestart(t, k, prod.Users, plan)
				checkPartial(t, atKill, *stalled)
				flagged := inputtest.CheckPlacement(t, all, prod.Placed)
				t.Logf("%d of %d deliveries flagged out of their shard's range, as expected", flagged, len(all))
			})
		}
	}
}

// requireBothKinds fails t unless the user records with data in [from, to]
// include some placed inside their shard's hash key range and some outside.
func requireBothKinds(t *testing.T, placed map[string]inputtest.Placement, from, to string) {
	t.Helper()
	in, out := 0, 0
	for d, p := range placed {
		switch {
		case d < from || d > to:
		case p.OutOfRange:
			out++
		default:
			in++
		}
	}
	if in == 0 || out == 0 {
		t.Fatalf("user records %s to %s: %d inside their shard's range, %d outside; the test needs both", from, to, in, out)
	}
}
