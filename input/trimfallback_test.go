package input

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestTrimFallbackFilter: a read from TRIM_HORIZON in place of a refused start
// keeps exactly what that start would have read when the first record seen
// lies after it (the start's record was trimmed: expired), and nothing when
// that record lies at or before it (the start's record is still there:
// present, the refusal had another cause). Before, such a read skipped every
// record up to the start: a start beyond every record of the shard skipped
// all of them for good.
func TestTrimFallbackFilter(t *testing.T) {
	recs := func(seqs ...int) []types.Record {
		out := make([]types.Record, len(seqs))
		for i, s := range seqs {
			// Of different lengths: the order is numeric, not textual.
			out[i].SequenceNumber = aws.String(fmt.Sprint(s))
		}
		return out
	}
	seqs := func(rs []types.Record) string {
		var out []string
		for _, r := range rs {
			out = append(out, *r.SequenceNumber)
		}
		return fmt.Sprint(out)
	}
	after := shard.Start{Kind: shard.AfterSequence, Sequence: "100"}
	at := shard.Start{Kind: shard.AtSequence, Sequence: "100"}
	type read struct {
		in      []types.Record
		kept    string
		expired bool
		present bool
	}
	for _, tc := range []struct {
		name  string
		from  shard.Start
		reads []read
	}{
		{"after, still there", after, []read{
			{recs(), "[]", false, false}, // an empty read decides nothing
			{recs(98, 99), "[]", false, true},
			{recs(100, 101, 102), "[]", false, true}, // and nothing after it
		}},
		{"after, its own record first", after, []read{
			{recs(100, 101), "[]", false, true},
		}},
		{"at, still there", at, []read{
			{recs(99, 100, 101), "[]", false, true},
		}},
		{"at, its own record first", at, []read{
			{recs(100, 101), "[]", false, true},
		}},
		{"beyond every record", shard.Start{Kind: shard.AfterSequence, Sequence: "99999999999999999999"}, []read{
			{recs(5, 6), "[]", false, true},
		}},
		{"after, trimmed", after, []read{
			{recs(), "[]", false, false},
			{recs(), "[]", false, false},
			{recs(150, 151), "[150 151]", true, false},
			{recs(152), "[152]", false, false}, // reported once
		}},
		{"at, trimmed", at, []read{
			{recs(101, 102), "[101 102]", true, false},
		}},
		{"after, the last record trimmed, nothing after it yet", after, []read{
			{recs(), "[]", false, false},
			{recs(9000), "[9000]", true, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &trimFallback{from: tc.from}
			for i, rd := range tc.reads {
				kept, expired := f.filter(rd.in)
				if seqs(kept) != rd.kept || expired != rd.expired || f.present != rd.present {
					t.Fatalf("read %d %s: kept %s expired %v present %v, want %s %v %v", i, seqs(rd.in), seqs(kept), expired, f.present, rd.kept, rd.expired, rd.present)
				}
			}
		})
	}
}

// TestExpiredCheckpoint restarts both readers from a checkpoint that Kinesis
// refuses with InvalidArgumentException: once because its record passed the
// retention period (trimmed), once (the first try only) for another cause
// while the record is still there. Trimmed, the shard reads on from the
// oldest record left, never repeating the records at or before the
// checkpoint, reported by a warning and the kinesis_checkpoints_expired
// metric. Refused for another cause, the read from TRIM_HORIZON shows the
// record still there: nothing is skipped, an error names the position and
// the command that sets it, and the position is tried again, then read from.
//
// Before the first fix the restarted reader retried the refused start for
// ever (backoff up to 2 minutes) and shard 0 delivered nothing more; before
// the second, any refusal read on from TRIM_HORIZON skipping every record up
// to the refused position, and a position beyond every record of the shard
// skipped all of them for good (see TestPositionBeyondShardStopsIt).
func TestExpiredCheckpoint(t *testing.T) {
	t.Parallel()
	for _, reader := range []struct{ name, yaml string }{
		{"polling", "reader: polling"},
		{"efo", "efo: { consumer_name: app }"},
	} {
		for _, trimmed := range []bool{true, false} {
			name := reader.name + "/trimmed"
			if !trimmed {
				name = reader.name + "/refused_for_another_cause"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testExpiredCheckpoint(t, reader.yaml, trimmed)
			})
		}
	}
}

func testExpiredCheckpoint(t *testing.T, readerYAML string, trimmed bool) {
	const shard0, shard1 = "shardId-000000000000", "shardId-000000000001"
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, readerYAML)

	// First run: read and checkpoint everything there is, then stop.
	first := fakeProducePerShard(t, srv, "orders", "a", 20, 4)
	out1 := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, conf, out1)
	p.StopWhen(t, out1, len(first), time.Minute)
	inputtest.CheckDelivery(t, out1.All(), first, true)
	recs, err := srv.ShardRecords("orders", shard0)
	if err != nil {
		t.Fatal(err)
	}
	checkpointSeq := *recs[len(recs)-1].SequenceNumber
	cps := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))
	if cp := cps.Shards[shard0]; cp.Position == nil || cp.Position.Sequence != checkpointSeq {
		t.Fatalf("checkpoint of %s after the first run: %+v, want the last record %s", shard0, cp.Position, checkpointSeq)
	}

	// While stopped: more records, then the refusal of shard 0's checkpoint.
	want := fakeProducePerShard(t, srv, "orders", "b", 30, 4)
	var refused atomic.Int32
	if trimmed {
		// The 20 records read and 5 unread ones pass the retention period.
		if _, err := srv.TrimShard("orders", shard0, 25); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			delete(want, "b-0-000000"+string(rune('0'+i)))
		}
	} else {
		// The first start after a sequence number in shard 0 is refused,
		// though its record is still there.
		srv.Control("", func(r *kinesisfake.Request) (bool, int, []byte) {
			if !startsAtSequence(r, shard0) || !refused.CompareAndSwap(0, 1) {
				return false, 0, nil
			}
			status, body := kinesisfake.ErrorBody("InvalidArgumentException", "StartingSequenceNumber "+checkpointSeq+" is refused (injected).")
			return true, status, body
		})
	}

	logs := &inputtest.Logs{}
	metrics := &inputtest.Metrics{}
	out2 := &inputtest.Collector{}
	p = inputtest.StartPipelineWith(t, conf, out2.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
	p.StopWhen(t, out2, len(want), time.Minute)
	// Every record left after the checkpoint exactly once; none of the first
	// run's records again (they are not in want).
	inputtest.CheckDelivery(t, out2.All(), want, true)
	inputtest.CheckOrder(t, out2.All())
	if !trimmed && refused.Load() != 1 {
		t.Fatal("the injected refusal was not met: the test proves nothing")
	}

	text := logs.String()
	fallbacks := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, shard0) && strings.Contains(line, "from the oldest record (TRIM_HORIZON) instead") {
			fallbacks++
			if !strings.Contains(line, "level=WARN") {
				t.Errorf("the fallback is not logged as a warning: %s", line)
			}
		}
	}
	if fallbacks != 1 {
		t.Errorf("the fallback to TRIM_HORIZON was logged %d times, want once:\n%s", fallbacks, text)
	}
	expired := "checkpoint " + checkpointSeq + " expired"
	expiredLogged := strings.Contains(text, expired)
	expiredCount := metrics.Counter("kinesis_checkpoints_expired", "stream", "orders", "shard", shard0)
	if n := metrics.Counter("kinesis_checkpoints_expired", "stream", "orders", "shard", shard1); n != 0 {
		t.Errorf("kinesis_checkpoints_expired of the untouched %s is %d", shard1, n)
	}
	if trimmed {
		if !expiredLogged {
			t.Errorf("no warning %q:\n%s", expired, text)
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, expired) && (!strings.Contains(line, "level=WARN") || !strings.Contains(line, "stream orders shard "+shard0) || !strings.Contains(line, "retention period") || !strings.Contains(line, "lost")) {
				t.Errorf("the warning does not name the stream, the shard, the retention period and the loss at warning level: %s", line)
			}
		}
		if expiredCount != 1 {
			t.Errorf("kinesis_checkpoints_expired of %s is %d, want 1", shard0, expiredCount)
		}
	} else {
		if expiredLogged {
			t.Errorf("a checkpoint whose record is still there was reported expired:\n%s", text)
		}
		if expiredCount != 0 {
			t.Errorf("kinesis_checkpoints_expired of %s is %d for a checkpoint whose record is still there", shard0, expiredCount)
		}
		if !hasLine(text, "level=ERROR", "shard "+shard0, checkpointSeq, "checkpoint set") {
			t.Errorf("the refusal of a checkpoint whose record is still there is not an error naming the position and `checkpoint set`:\n%s", text)
		}
	}
}

// startsAtSequence reports whether a GetShardIterator or SubscribeToShard call
// to the shard starts at or after a sequence number.
func startsAtSequence(r *kinesisfake.Request, shardID string) bool {
	var in struct {
		ShardId           string
		ShardIteratorType string
		StartingPosition  struct{ Type string }
	}
	if (r.Op != "GetShardIterator" && r.Op != "SubscribeToShard") || json.Unmarshal(r.Body, &in) != nil || in.ShardId != shardID {
		return false
	}
	typ := in.ShardIteratorType + in.StartingPosition.Type
	return typ == "AT_SEQUENCE_NUMBER" || typ == "AFTER_SEQUENCE_NUMBER"
}
