package inputtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// AggregateMix describes what ProduceAggregated writes.
type AggregateMix struct {
	Aggregates int // aggregated records
	MinUsers   int // user records per aggregate, at least
	MaxUsers   int // and at most
	Plain      int // plain records mixed in between
	Corrupt    int // corrupt aggregates mixed in (their data is in CorruptData)
	Style      AggregateStyle
	Seed       uint64
}

// AggregateStyle is how ProduceAggregated fills and routes its aggregates.
type AggregateStyle int

const (
	// KPLStyle is what the KPL does: the user records of an aggregate all
	// hash into one shard, and the aggregate is put with the first one's
	// partition key, so every user record lies in the hash key range of the
	// shard that stores it.
	KPLStyle AggregateStyle = iota
	// MixedKeysStyle is what the kinesis-aggregation libraries (used from
	// Lambda) do: the user records of an aggregate take partition keys of
	// every shard and no explicit hash key, and the aggregate is put with one
	// explicit hash key, that of its first user record's partition key, or,
	// for about one aggregate in four, a fixed one (2^127, the middle of the
	// hash key space), as a producer that pins its aggregates does. Most user
	// records then lie outside the range of the shard that stores them.
	MixedKeysStyle
)

// fixedExplicitHashKey is the explicit hash key MixedKeysStyle puts some
// aggregates with: 2^127, where a stream of an even number of shards has a
// shard boundary.
var fixedExplicitHashKey = kpl.HashKey{Hi: 1 << 63}.String()

// AggregatedOutput is what ProduceAggregated wrote.
type AggregatedOutput struct {
	// Users maps every user record's and plain record's data to its
	// partition key: what the pipeline must deliver.
	Users Produced
	// Corrupt holds the data of the corrupt aggregates, delivered whole.
	Corrupt map[string]bool
	// Placed maps the data of every user record of a (sound) aggregate to
	// where it was stored: the shard PutRecords put its aggregate in.
	Placed map[string]Placement
}

// Placement is where a user record of an aggregate was stored.
type Placement struct {
	Shard string
	// OutOfRange tells that the user record's hash key (the MD5 of its
	// partition key) lies outside the hash key range of Shard: the input
	// must deliver it all the same, flagged kinesis_hash_key_out_of_range.
	OutOfRange bool
}

// ProduceAggregated writes aggregated records in the KPL's format, built and
// routed in mix.Style, mixed with plain records. Data is "<prefix>-<index>"
// in write order, so the order of each partition key can be checked.
func ProduceAggregated(t testing.TB, client *kinesis.Client, stream, prefix string, mix AggregateMix) AggregatedOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shards := keysByShard(t, ctx, client, stream, 16)
	ranges := map[string]kpl.HashKeyRange{}
	for _, s := range shards {
		ranges[s.id] = s.hashRange
	}
	rng := rand.New(rand.NewPCG(mix.Seed, 1))
	out := AggregatedOutput{Users: Produced{}, Corrupt: map[string]bool{}, Placed: map[string]Placement{}}
	index := 0
	next := func(pk string) []byte {
		d := fmt.Sprintf("%s-%07d", prefix, index)
		index++
		out.Users[d] = pk
		return []byte(d)
	}
	kinds := make([]byte, 0, mix.Aggregates+mix.Plain+mix.Corrupt)
	for range mix.Aggregates {
		kinds = append(kinds, 'a')
	}
	for range mix.Plain {
		kinds = append(kinds, 'p')
	}
	for range mix.Corrupt {
		kinds = append(kinds, 'c')
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })

	// batch holds the entries of the next PutRecords call and, for each
	// sound aggregate, its user records, to be placed once it is stored.
	var batch []types.PutRecordsRequestEntry
	var batchUsers [][]kpl.UserRecord
	flush := func() {
		for len(batch) > 0 {
			res, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
			if err != nil {
				t.Fatalf("putting records: %v", err)
			}
			var retry []types.PutRecordsRequestEntry
			var retryUsers [][]kpl.UserRecord
			for i, r := range res.Records {
				if r.ErrorCode != nil {
					retry = append(retry, batch[i])
					retryUsers = append(retryUsers, batchUsers[i])
					continue
				}
				place(t, out.Placed, aws.ToString(r.ShardId), ranges, batchUsers[i])
			}
			batch, batchUsers = retry, retryUsers
		}
	}
	for _, kind := range kinds {
		pool := shards[rng.IntN(len(shards))].keys
		// key picks a user record's partition key: from the pool of the
		// aggregate's shard, or, mixing keys, from any shard's pool.
		key := func() string {
			if mix.Style == MixedKeysStyle {
				pool = shards[rng.IntN(len(shards))].keys
			}
			return pool[rng.IntN(len(pool))]
		}
		switch kind {
		case 'p':
			pk := pool[rng.IntN(len(pool))]
			batch = append(batch, types.PutRecordsRequestEntry{PartitionKey: aws.String(pk), Data: next(pk)})
			batchUsers = append(batchUsers, nil)
		case 'a', 'c':
			n := mix.MinUsers + rng.IntN(mix.MaxUsers-mix.MinUsers+1)
			users := make([]kpl.UserRecord, n)
			var corruptData []string
			for i := range users {
				pk := key()
				if kind == 'c' {
					users[i] = kpl.UserRecord{PartitionKey: pk, Data: []byte(fmt.Sprintf("%s-corrupt-%d-%d", prefix, index, i))}
					corruptData = append(corruptData, string(users[i].Data))
				} else {
					users[i] = kpl.UserRecord{PartitionKey: pk, Data: next(pk)}
				}
			}
			agg, err := kpl.Pack(users)
			if err != nil {
				t.Fatal(err)
			}
			entry := types.PutRecordsRequestEntry{PartitionKey: aws.String(agg.PartitionKey), Data: agg.Data}
			if mix.Style == MixedKeysStyle {
				ehk := kpl.PartitionHashKey(agg.PartitionKey).String()
				if rng.IntN(4) == 0 {
					ehk = fixedExplicitHashKey
				}
				entry.ExplicitHashKey = aws.String(ehk)
			}
			if kind == 'c' {
				agg.Data[len(agg.Data)-1] ^= 0xff // break the digest
				out.Corrupt[string(agg.Data)] = true
				users = nil
			}
			batch = append(batch, entry)
			batchUsers = append(batchUsers, users)
		}
		if len(batch) == 100 {
			flush()
		}
	}
	flush()
	return out
}

// place records where the user records of an aggregate were stored.
func place(t testing.TB, placed map[string]Placement, shardID string, ranges map[string]kpl.HashKeyRange, users []kpl.UserRecord) {
	t.Helper()
	r, ok := ranges[shardID]
	if !ok && len(users) > 0 {
		t.Fatalf("PutRecords stored an aggregate in shard %q, not an open shard of the stream", shardID)
	}
	for i := range users {
		hk, err := users[i].HashKey()
		if err != nil {
			t.Fatal(err)
		}
		placed[string(users[i].Data)] = Placement{Shard: shardID, OutOfRange: !r.Contains(hk)}
	}
}

// shardKeys is an open shard and partition keys that hash into it.
type shardKeys struct {
	id        string
	hashRange kpl.HashKeyRange
	keys      []string
}

// keysByShard finds, for every open shard, partition keys that hash into it.
func keysByShard(t testing.TB, ctx context.Context, client *kinesis.Client, stream string, perShard int) []shardKeys {
	t.Helper()
	res, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var shards []shardKeys
	for _, s := range res.Shards {
		end := aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)
		if end != "" && end != "9223372036854775807" {
			continue // closed
		}
		r, err := kpl.ParseHashKeyRange(*s.HashKeyRange.StartingHashKey, *s.HashKeyRange.EndingHashKey)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, shardKeys{id: aws.ToString(s.ShardId), hashRange: r})
	}
	for i := 0; ; i++ {
		pk := fmt.Sprintf("user-%d", i)
		hk := kpl.PartitionHashKey(pk)
		done := true
		for s := range shards {
			if shards[s].hashRange.Contains(hk) && len(shards[s].keys) < perShard {
				shards[s].keys = append(shards[s].keys, pk)
			}
			done = done && len(shards[s].keys) == perShard
		}
		if done {
			return shards
		}
	}
}

// CraftedUserRecords is how many empty user records of a one-byte partition
// key fit in one Kinesis record of 1 MiB: 6 bytes of protocol buffer each.
const CraftedUserRecords = 166_650

// CraftedAggregate packs n empty user records of the partition key "k" into
// one aggregated record: what anyone who can write to a stream can put to run
// out of memory a reader that converts an aggregate whole (with n =
// CraftedUserRecords, about a kilobyte of messages for each byte written).
func CraftedAggregate(t testing.TB, n int) kpl.Aggregate {
	t.Helper()
	var b kpl.Builder
	for range n {
		if err := b.Add(kpl.UserRecord{PartitionKey: "k", Data: []byte{}}); err != nil {
			t.Fatalf("packing %d empty user records: %v", n, err)
		}
	}
	agg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return agg
}
