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
	Seed       uint64
}

// AggregatedOutput is what ProduceAggregated wrote.
type AggregatedOutput struct {
	// Users maps every user record's and plain record's data to its
	// partition key: what the pipeline must deliver.
	Users Produced
	// Corrupt holds the data of the corrupt aggregates, delivered whole.
	Corrupt map[string]bool
}

// ProduceAggregated writes KPL aggregated records mixed with plain records,
// as the KPL does: the user records of one aggregate all hash into the shard
// the aggregate is written to. Data is "<prefix>-<index>" in write order, so
// the order of each partition key can be checked.
func ProduceAggregated(t testing.TB, client *kinesis.Client, stream, prefix string, mix AggregateMix) AggregatedOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keys := keysByShard(t, ctx, client, stream, 16)
	rng := rand.New(rand.NewPCG(mix.Seed, 1))
	out := AggregatedOutput{Users: Produced{}, Corrupt: map[string]bool{}}
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

	var batch []types.PutRecordsRequestEntry
	flush := func() {
		for len(batch) > 0 {
			res, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
			if err != nil {
				t.Fatalf("putting records: %v", err)
			}
			var retry []types.PutRecordsRequestEntry
			for i, r := range res.Records {
				if r.ErrorCode != nil {
					retry = append(retry, batch[i])
				}
			}
			batch = retry
		}
	}
	for _, kind := range kinds {
		pool := keys[rng.IntN(len(keys))]
		switch kind {
		case 'p':
			pk := pool[rng.IntN(len(pool))]
			batch = append(batch, types.PutRecordsRequestEntry{PartitionKey: aws.String(pk), Data: next(pk)})
		case 'a', 'c':
			n := mix.MinUsers + rng.IntN(mix.MaxUsers-mix.MinUsers+1)
			users := make([]kpl.UserRecord, n)
			var corruptData []string
			for i := range users {
				pk := pool[rng.IntN(len(pool))]
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
			if kind == 'c' {
				agg.Data[len(agg.Data)-1] ^= 0xff // break the digest
				out.Corrupt[string(agg.Data)] = true
			}
			batch = append(batch, types.PutRecordsRequestEntry{PartitionKey: aws.String(agg.PartitionKey), Data: agg.Data})
		}
		if len(batch) == 100 {
			flush()
		}
	}
	flush()
	return out
}

// keysByShard finds, for every open shard, partition keys that hash into it.
func keysByShard(t testing.TB, ctx context.Context, client *kinesis.Client, stream string, perShard int) [][]string {
	t.Helper()
	res, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var ranges []kpl.HashKeyRange
	for _, s := range res.Shards {
		end := aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)
		if end != "" && end != "9223372036854775807" {
			continue // closed
		}
		r, err := kpl.ParseHashKeyRange(*s.HashKeyRange.StartingHashKey, *s.HashKeyRange.EndingHashKey)
		if err != nil {
			t.Fatal(err)
		}
		ranges = append(ranges, r)
	}
	keys := make([][]string, len(ranges))
	for i := 0; ; i++ {
		pk := fmt.Sprintf("user-%d", i)
		hk := kpl.PartitionHashKey(pk)
		done := true
		for s, r := range ranges {
			if r.Contains(hk) && len(keys[s]) < perShard {
				keys[s] = append(keys[s], pk)
			}
			done = done && len(keys[s]) == perShard
		}
		if done {
			return keys
		}
	}
}
