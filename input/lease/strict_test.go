package lease

import (
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// Before, a shard item with an attribute of the wrong type was read with a
// default in its place: a leaseCounter of type S read as 0 (every take then
// failed as if another instance had taken the lease first, logged at
// debug), a checkpoint stored as a number read as no checkpoint (the shard
// read again from its start), a sub-sequence stored as a string as 0, and
// an item whose kind was a number, or a second item of one shard, was left
// out of the scan without a word. Each is now a broken item of the scan,
// naming the table, the item, the attribute, its value and the expected
// type, and Get refuses it the same way.
func TestMalformedShardItemIsBroken(t *testing.T) {
	t.Parallel()
	const id = "shardId-000000000000"
	key := ShardKey(arn, id)
	good := func() map[string]types.AttributeValue {
		return encodeShard(Shard{Stream: arn, ShardID: id, Counter: 4, Checkpoint: checkpoint.Checkpoint{
			Start:    checkpoint.Start{Kind: "TRIM_HORIZON"},
			Position: &checkpoint.Position{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 2},
		}})
	}
	with := func(name string, v types.AttributeValue) map[string]types.AttributeValue {
		item := good()
		item[name] = v
		return item
	}
	cases := []struct {
		name string
		item map[string]types.AttributeValue
		want []string // besides the table and the item's key
	}{
		{"counter of type S", with(attrCounter, str("abc")), []string{"leaseCounter", `S "abc"`, "expected N"}},
		{"counter not an integer", with(attrCounter, &types.AttributeValueMemberN{Value: "1.5"}), []string{"leaseCounter", "N 1.5", "expected N (an integer)"}},
		{"kind a number", with(attrKind, num(1)), []string{"kind", "N 1", "expected S"}},
		{"unknown kind", with(attrKind, str("shrad")), []string{"kind", `S "shrad"`, `"shard"`}},
		{"checkpoint a number", with(attrCheckpoint, num(4959)), []string{"checkpoint", "N 4959", "expected S"}},
		{"sub-sequence a string", with(attrSubSequence, str("7")), []string{"checkpointSubSequenceNumber", `S "7"`, "expected N"}},
		{"checkpoint not a number", with(attrCheckpoint, str("not-a-number")), []string{"checkpoint", `S "not-a-number"`, "sequence number"}},
		{"checkpoint empty", with(attrCheckpoint, str("")), []string{"checkpoint", `S ""`, "sequence number"}},
		{"checkpoint absurdly long", with(attrCheckpoint, str(strings.Repeat("7", 500))), []string{"checkpoint", "(500 characters)", "sequence number"}},
		{"start time of year 1", func() map[string]types.AttributeValue {
			item := good()
			delete(item, attrCheckpoint)
			item[attrStartKind] = str("AT_TIMESTAMP")
			item[attrStartTime] = str("0001-01-01T00:00:00Z")
			return item
		}(), []string{"startTimestamp", `S "0001-01-01T00:00:00Z"`, "after 2013"}},
		{"start time of year 2999", func() map[string]types.AttributeValue {
			item := good()
			delete(item, attrCheckpoint)
			item[attrStartKind] = str("AT_TIMESTAMP")
			item[attrStartTime] = str("2999-01-01T00:00:00Z")
			return item
		}(), []string{"startTimestamp", `S "2999-01-01T00:00:00Z"`, "less than a day from now"}},
		{"unknown start", func() map[string]types.AttributeValue {
			item := good()
			delete(item, attrCheckpoint)
			item[attrStartKind] = str("SOMETIME")
			return item
		}(), []string{"startKind", `S "SOMETIME"`, "TRIM_HORIZON"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := NewMemory()
			m.SetItem(tc.item)
			sc, err := m.Scan(t.Context(), arn)
			if err != nil {
				t.Fatalf("one broken item fails the whole scan: %v", err)
			}
			if len(sc.Shards) != 0 || len(sc.Broken) != 1 || sc.Broken[0].ShardID != id || sc.Broken[0].Key != key {
				t.Fatalf("scan: shards %+v, broken %+v; want shard %s broken", sc.Shards, sc.Broken, id)
			}
			for _, w := range append([]string{`lease table "memory"`, "item " + key, "expected"}, tc.want...) {
				if !strings.Contains(sc.Broken[0].Err.Error(), w) {
					t.Errorf("error %q does not name %q", sc.Broken[0].Err, w)
				}
			}
			if _, ok := sc.BrokenShards()[id]; !ok {
				t.Errorf("BrokenShards does not name %s", id)
			}
			if _, ok, err := m.Get(t.Context(), arn, id); err == nil || ok {
				t.Errorf("Get of the broken item: ok %v, err %v", ok, err)
			}
		})
	}
}

// A second item of one shard (another leaseKey, same stream and shard id)
// makes the shard broken: before, the scan listed both and every take of
// the shard failed on the counter of the wrong one.
func TestSecondItemOfAShardIsBroken(t *testing.T) {
	t.Parallel()
	const id = "shardId-000000000001"
	m := NewMemory()
	m.SetShard(Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
	stray := maps.Clone(encodeShard(Shard{Stream: arn, ShardID: id, Counter: 9, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}}))
	stray[attrKey] = str("copy-of-" + id)
	m.SetItem(stray)
	sc, err := m.Scan(t.Context(), arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Broken) != 1 || sc.Broken[0].ShardID != id || sc.Broken[0].Key != "copy-of-"+id {
		t.Fatalf("broken %+v, want the stray item of %s", sc.Broken, id)
	}
	if msg := sc.Broken[0].Err.Error(); !strings.Contains(msg, "second item of shard "+id) || !strings.Contains(msg, ShardKey(arn, id)) {
		t.Fatalf("error %q does not name the shard and its item", msg)
	}
	if len(sc.Shards) != 1 {
		t.Fatalf("the shard's own item is not listed: %+v", sc.Shards)
	}
}
