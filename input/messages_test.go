package input

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

func testConverter(t *testing.T, info shardInfo, resume *checkpoint.Position) *converter {
	t.Helper()
	res := service.MockResources()
	in := &kinesisInput{log: res.Logger(), metrics: newMetrics(res.Metrics()), conf: config{Deaggregate: true}}
	return newConverter(&streamReader{in: in, name: "s"}, info, resume)
}

func aggregate(t *testing.T, keys ...string) []byte {
	t.Helper()
	var users []kpl.UserRecord
	for i, k := range keys {
		users = append(users, kpl.UserRecord{PartitionKey: k, Data: []byte(fmt.Sprint(i))})
	}
	agg, err := kpl.Pack(users)
	if err != nil {
		t.Fatal(err)
	}
	return agg.Data
}

func TestConverterDropsUserRecordsOfOtherShards(t *testing.T) {
	// The lower half of the hash key space, as after a split.
	info := shardInfo{id: "shardId-000000000001", hashLow: "0", hashHigh: "170141183460469231731687303715884105727"}
	var low, high string
	for i := 0; low == "" || high == ""; i++ {
		k := fmt.Sprint("k", i)
		if kpl.PartitionHashKey(k).Hi < 1<<63 {
			low = k
		} else {
			high = k
		}
	}
	c := testConverter(t, info, nil)
	msgs, last, n := c.convert(shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), Data: aggregate(t, low, high, low, high)},
	}})
	if n != 2 || len(msgs) != 2 {
		t.Fatalf("%d messages, want the 2 user records of this shard", len(msgs))
	}
	for _, m := range msgs {
		if pk, _ := m.MetaGet(metaPartitionKey); pk != low {
			t.Fatalf("delivered a user record of key %s, which hashes outside the shard", pk)
		}
	}
	if last != (checkpoint.Position{Sequence: "10", SubSequence: 2, Partial: true}) {
		t.Fatalf("last position %+v: the aggregate's last user record (3) was dropped, so the position is inside it", last)
	}
}

func TestConverterSkipsAcknowledgedUserRecords(t *testing.T) {
	c := testConverter(t, shardInfo{id: "s"}, &checkpoint.Position{Sequence: "10", SubSequence: 1, Partial: true})
	msgs, last, _ := c.convert(shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), PartitionKey: aws.String("a"), Data: aggregate(t, "a", "b", "c", "d")},
		{SequenceNumber: aws.String("11"), PartitionKey: aws.String("p"), Data: []byte("plain")},
	}})
	var got []string
	for _, m := range msgs {
		b, _ := m.AsBytes()
		sub, _ := m.MetaGet(metaSubSequence)
		got = append(got, string(b)+"/"+sub)
	}
	if fmt.Sprint(got) != "[2/2 3/3 plain/]" {
		t.Fatalf("delivered %v, want user records 2 and 3 then the plain record", got)
	}
	if last != (checkpoint.Position{Sequence: "11"}) {
		t.Fatalf("last position %+v", last)
	}
	if c.positions[1] != (checkpoint.Position{Sequence: "10", SubSequence: 3}) {
		t.Fatalf("the aggregate's last user record has position %+v, want it whole", c.positions[1])
	}
}

func TestConverterFlagsCorruptAggregates(t *testing.T) {
	data := aggregate(t, "a", "b")
	data = data[:len(data)-3] // truncated: the digest no longer matches
	c := testConverter(t, shardInfo{id: "s"}, nil)
	msgs, _, n := c.convert(shard.Batch{Records: []types.Record{{SequenceNumber: aws.String("1"), PartitionKey: aws.String("a"), Data: data}}})
	if n != 1 {
		t.Fatalf("%d messages, want the raw record", n)
	}
	if msgs[0].GetError() == nil {
		t.Fatal("corrupt aggregate not flagged with an error")
	}
	if reason, _ := msgs[0].MetaGet(metaDeaggError); reason == "" {
		t.Fatal("no kinesis_deaggregation_error metadata")
	}
	if b, _ := msgs[0].AsBytes(); string(b) != string(data) {
		t.Fatal("the raw record was altered")
	}
}
