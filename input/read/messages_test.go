package read

import (
	"crypto/md5"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

func testConverter(t *testing.T, info shardInfo, resume *checkpoint.Position) *converter {
	t.Helper()
	res := service.MockResources()
	s := &Stream{env: &Env{Log: res.Logger(), Metrics: NewMetrics(res.Metrics()), Limits: Limits{Deaggregate: true}}, conf: StreamConfig{Name: "s"}}
	return newConverter(s, newShardLog(res.Logger(), "s", info.id), info, resume)
}

// convertAll converts the whole of b in one part.
func convertAll(c *converter, b shard.Batch) (service.MessageBatch, checkpoint.Position, int) {
	msgs, last, n, _ := c.convertPart(b, 0, math.MaxInt)
	return msgs, last, n
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

// A Kinesis record is stored in one shard only: user records of an aggregate
// whose hash key lies outside the shard (aggregators other than the KPL mix
// keys) exist nowhere else. Before the fix they were dropped, and lost.
func TestConverterDeliversUserRecordsOutsideTheShardFlagged(t *testing.T) {
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
	msgs, last, n := convertAll(c, shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), Data: aggregate(t, low, high, low, high)},
		{SequenceNumber: aws.String("11"), Data: aggregate(t, high)},
	}})
	if n != 5 || len(msgs) != 5 {
		t.Fatalf("%d messages, want all 5 user records", len(msgs))
	}
	for i, m := range msgs {
		pk, _ := m.MetaGet(metaPartitionKey)
		flag, flagged := m.MetaGetMut(metaOutOfRange)
		if want := pk == high; flagged != want || (flagged && flag != true) {
			t.Errorf("message %d (key %s): %s = %v (set %v), want set %v", i, pk, metaOutOfRange, flag, flagged, want)
		}
	}
	want := []checkpoint.Position{
		{Sequence: "10", SubSequence: 0, Partial: true}, {Sequence: "10", SubSequence: 1, Partial: true},
		{Sequence: "10", SubSequence: 2, Partial: true}, {Sequence: "10", SubSequence: 3},
		{Sequence: "11", SubSequence: 0},
	}
	if fmt.Sprint(c.positions) != fmt.Sprint(want) || last != want[4] {
		t.Fatalf("positions %+v (last %+v), want %+v", c.positions, last, want)
	}
}

// A resume inside an aggregate skips exactly the acknowledged user records,
// also when they (or the ones after them) lie outside the shard's range.
func TestConverterResumesInsideAggregateOfForeignKeys(t *testing.T) {
	info := shardInfo{id: "shardId-000000000001", hashLow: "0", hashHigh: "170141183460469231731687303715884105727"}
	var keys []string
	for i := 0; len(keys) < 6; i++ {
		keys = append(keys, fmt.Sprint("k", i))
	}
	c := testConverter(t, info, &checkpoint.Position{Sequence: "10", SubSequence: 2, Partial: true})
	msgs, _, _ := convertAll(c, shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), Data: aggregate(t, keys...)},
	}})
	var got []string
	for _, m := range msgs {
		b, _ := m.AsBytes()
		got = append(got, string(b))
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("delivered %v, want user records 3, 4 and 5", got)
	}
}

func TestConverterSkipsAcknowledgedUserRecords(t *testing.T) {
	c := testConverter(t, shardInfo{id: "s"}, &checkpoint.Position{Sequence: "10", SubSequence: 1, Partial: true})
	msgs, last, _ := convertAll(c, shard.Batch{Records: []types.Record{
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

// A position inside a record that is no aggregate (KCL stores user record
// 0 of a plain record; `checkpoint import` keeps it so) means the record was
// processed: it is skipped. With deaggregation off, an aggregate at such a
// position is delivered whole again, as its later user records were not
// processed. Before the fix the plain record was delivered a second time.
func TestConverterSkipsAPlainRecordAtAPositionInsideIt(t *testing.T) {
	c := testConverter(t, shardInfo{id: "s"}, &checkpoint.Position{Sequence: "10", Partial: true})
	msgs, _, _ := convertAll(c, shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), PartitionKey: aws.String("p"), Data: []byte("done")},
		{SequenceNumber: aws.String("11"), PartitionKey: aws.String("p"), Data: []byte("next")},
	}})
	if len(msgs) != 1 {
		t.Fatalf("delivered %d messages, want only the record after the position", len(msgs))
	}
	if b, _ := msgs[0].AsBytes(); string(b) != "next" {
		t.Fatalf("delivered %q, want next", b)
	}

	c = testConverter(t, shardInfo{id: "s"}, &checkpoint.Position{Sequence: "10", Partial: true})
	c.deaggregate = false
	msgs, _, _ = convertAll(c, shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), PartitionKey: aws.String("a"), Data: aggregate(t, "a", "b")},
	}})
	if len(msgs) != 1 {
		t.Fatalf("with deaggregation off, an aggregate half processed was delivered %d times, want once, whole", len(msgs))
	}
}

func TestConverterFlagsCorruptAggregates(t *testing.T) {
	data := aggregate(t, "a", "b")
	data = data[:len(data)-3] // truncated: the digest no longer matches
	c := testConverter(t, shardInfo{id: "s"}, nil)
	msgs, _, n := convertAll(c, shard.Batch{Records: []types.Record{{SequenceNumber: aws.String("1"), PartitionKey: aws.String("a"), Data: data}}})
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

// An aggregate's user records are converted a part of at most max messages at
// a time, in order, with the positions of a whole conversion, and resuming
// inside it skips the acknowledged ones across parts. Before the fix an
// aggregate was never split: one Kinesis record of 1 MB holding 166,650 empty
// user records became 166,650 messages at once (223 MB of RSS), whatever
// checkpoint.limit said.
func TestConverterSplitsAnAggregateIntoPartsOfAtMostTheLimit(t *testing.T) {
	const users, limit = 25, 10
	var keys []string
	for i := range users {
		keys = append(keys, fmt.Sprint("k", i))
	}
	b := shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("10"), PartitionKey: aws.String("p"), Data: []byte("before")},
		{SequenceNumber: aws.String("11"), Data: aggregate(t, keys...)},
		{SequenceNumber: aws.String("12"), PartitionKey: aws.String("p"), Data: []byte("after")},
	}}
	for _, resume := range []*checkpoint.Position{nil, {Sequence: "11", SubSequence: 13, Partial: true}} {
		whole := testConverter(t, shardInfo{id: "s"}, resume)
		wantMsgs, _, _ := convertAll(whole, b)
		want := fmt.Sprint(whole.positions)

		c := testConverter(t, shardInfo{id: "s"}, resume)
		var got []checkpoint.Position
		var data []string
		parts := 0
		for next := 0; next < len(b.Records); parts++ {
			var msgs service.MessageBatch
			var last checkpoint.Position
			var n int
			msgs, last, n, next = c.convertPart(b, next, limit)
			if n != len(msgs) || n > limit || n == 0 {
				t.Fatalf("resume %+v, part %d: %d messages (n %d), want 1 to %d", resume, parts, len(msgs), n, limit)
			}
			if last != c.positions[n-1] {
				t.Fatalf("resume %+v, part %d: last position %+v, want %+v", resume, parts, last, c.positions[n-1])
			}
			got = append(got, c.positions...)
			for _, m := range msgs {
				d, _ := m.AsBytes()
				data = append(data, string(d))
			}
			if parts > users {
				t.Fatal("the conversion makes no progress")
			}
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("resume %+v: positions in parts %v, want those of a whole conversion %v", resume, got, want)
		}
		var wantData []string
		for _, m := range wantMsgs {
			d, _ := m.AsBytes()
			wantData = append(wantData, string(d))
		}
		if fmt.Sprint(data) != fmt.Sprint(wantData) {
			t.Fatalf("resume %+v: delivered %v in parts, want %v", resume, data, wantData)
		}
		if wantParts := (len(wantMsgs) + limit - 1) / limit; parts != wantParts {
			t.Fatalf("resume %+v: %d parts, want %d", resume, parts, wantParts)
		}
		if c.open.rec != nil {
			t.Fatal("the aggregate is still open after its last user record")
		}
	}
}

// TestConverterSaysSoOfAnEmptyAggregate: a sound KPL aggregate of no user
// records delivers nothing, and says so at WARN (the first of a shard),
// naming the record; the records around it are delivered. Before, it
// vanished without a word.
func TestConverterSaysSoOfAnEmptyAggregate(t *testing.T) {
	logs := &inputtest.Logs{}
	c := testConverter(t, shardInfo{id: "s"}, nil)
	c.log = newShardLog(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil))), "orders", "s")
	// The KPL's magic, an empty protobuf message and its MD5.
	sum := md5.Sum(nil)
	empty := append([]byte{0xF3, 0x89, 0x9A, 0xC2}, sum[:]...)
	msgs, last, n := convertAll(c, shard.Batch{Records: []types.Record{
		{SequenceNumber: aws.String("1"), PartitionKey: aws.String("a"), Data: []byte("x")},
		{SequenceNumber: aws.String("2"), PartitionKey: aws.String("a"), Data: empty},
		{SequenceNumber: aws.String("3"), PartitionKey: aws.String("a"), Data: []byte("y")},
		{SequenceNumber: aws.String("4"), PartitionKey: aws.String("a"), Data: empty},
	}})
	if n != 2 || last.Sequence != "3" {
		t.Fatalf("%d messages up to %+v, want the 2 plain records", n, last)
	}
	for i, want := range []string{"x", "y"} {
		if b, _ := msgs[i].AsBytes(); string(b) != want {
			t.Fatalf("message %d is %q, want %q", i, b, want)
		}
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 || !strings.Contains(logs.String(), "record 2 is a KPL aggregate of no user records: nothing to deliver") {
		t.Fatalf("logs (want one WARN naming record 2):\n%s", logs)
	}
}
