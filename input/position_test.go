package input

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestOutOfRange: a sequence start below the shard's first sequence number,
// or above the last of a closed shard, is out of its range; other starts,
// and shards not listed, are never.
func TestOutOfRange(t *testing.T) {
	open := shardInfo{id: "s", startSeq: "100"}
	closed := shardInfo{id: "s", startSeq: "100", endSeq: "200"}
	after := func(seq string) shard.Start { return shard.Start{Kind: shard.AfterSequence, Sequence: seq} }
	for _, tc := range []struct {
		name  string
		start shard.Start
		sh    shardInfo
		out   bool
	}{
		{"below an open shard", after("99"), open, true},
		{"its first", after("100"), open, false},
		{"far above an open shard", after("99999999999999999999999999"), open, false},
		{"above a closed shard", after("201"), closed, true},
		{"a closed shard's last", after("200"), closed, false},
		{"an end below the start is no end", after("300"), shardInfo{id: "s", startSeq: "100", endSeq: "9"}, false},
		{"at, below", shard.Start{Kind: shard.AtSequence, Sequence: "5"}, open, true},
		{"trim horizon", shard.Start{Kind: shard.TrimHorizon}, closed, false},
		{"a shard not listed", after("1"), shardInfo{id: "s"}, false},
	} {
		err := outOfRange(tc.start, tc.sh)
		if (err != nil) != tc.out {
			t.Errorf("%s: outOfRange = %v, want out of range %v", tc.name, err, tc.out)
		}
		if err != nil && !strings.Contains(err.Error(), tc.start.Sequence) {
			t.Errorf("%s: %q does not name the sequence number", tc.name, err)
		}
	}
}

// TestWrongPositionStopsTheShard hand-edits a shard's checkpoint to a
// position the shard cannot hold: a sequence number beyond any it will ever
// have, one of another shard, one below its first. The run reads the other
// shard and nothing of this one, says at error level what is wrong, where the
// position is kept and the command that sets it, and shows the shard in
// kinesis_shard_stopped; after the position is set right, every record after
// it arrives once.
//
// Before, Kinesis refused the start, the input read the shard from
// TRIM_HORIZON skipping every record up to the refused position, and since
// no record ever came above it, every present and future record of the shard
// was skipped for good (the sequence number below the shard's first was
// taken for a stream created again, and the shard waited in silence).
func TestWrongPositionStopsTheShard(t *testing.T) {
	t.Parallel()
	for _, reader := range []struct{ name, yaml string }{
		{"polling", "reader: polling"},
		{"efo", "efo: { consumer_name: app }"},
	} {
		for _, wrong := range []string{"beyond", "other_shard", "below"} {
			t.Run(reader.name+"/"+wrong, func(t *testing.T) {
				t.Parallel()
				testWrongPosition(t, reader.yaml, wrong)
			})
		}
	}
}

func testWrongPosition(t *testing.T, readerYAML, wrong string) {
	const shard0, shard1 = "shardId-000000000000", "shardId-000000000001"
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, readerYAML)
	arn := srv.StreamARN("orders")

	first := fakeProducePerShard(t, srv, "orders", "a", 10, 2)
	out1 := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, conf, out1)
	p.StopWhen(t, out1, len(first), time.Minute)
	recs0, err := srv.ShardRecords("orders", shard0)
	if err != nil {
		t.Fatal(err)
	}
	recs1, err := srv.ShardRecords("orders", shard1)
	if err != nil {
		t.Fatal(err)
	}
	good := *recs0[len(recs0)-1].SequenceNumber

	var bad string
	switch wrong {
	case "beyond":
		bad = strings.Repeat("9", 56)
	case "other_shard":
		bad = *recs1[len(recs1)-1].SequenceNumber
	case "below":
		bad = "1"
	}
	setPosition := func(seq string) {
		t.Helper()
		setFilePosition(t, dir, arn, shard0, seq)
	}
	setPosition(bad)

	second := fakeProducePerShard(t, srv, "orders", "b", 10, 2)
	want0, want1 := inputtest.Produced{}, inputtest.Produced{}
	for data, key := range second {
		if strings.HasPrefix(data, "b-0-") {
			want0[data] = key
		} else {
			want1[data] = key
		}
	}

	logs := &inputtest.Logs{}
	metrics := &inputtest.Metrics{}
	out2 := &inputtest.Collector{}
	p = inputtest.StartPipelineWith(t, conf, out2.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
	said := func() bool {
		return hasLine(logs.String(), "level=ERROR", "shard "+shard0, bad, dir, "checkpoint set")
	}
	waitUntil(t, time.Minute, func() bool {
		return len(out2.All()) >= len(want1) && said() &&
			metrics.Counter("kinesis_shard_stopped", "stream", "orders", "shard", shard0) == 1
	})
	p.Stop(t)
	if containsShard(out2.All(), shard0) {
		t.Errorf("records of %s were read past the wrong position %s", shard0, bad)
	}
	inputtest.CheckDelivery(t, out2.All(), want1, true)

	// Set right (as `checkpoint set` does), the shard reads on after it.
	setPosition(good)
	out3 := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, out3)
	p.StopWhen(t, out3, len(want0), time.Minute)
	inputtest.CheckDelivery(t, out3.All(), want0, true)
	inputtest.CheckOrder(t, out3.All())
}

// TestNotReadyWhileNoShardCanBeRead: /ready answers 200 while the only
// shard is read; once its checkpoint is a position the shard cannot hold,
// nothing can be read, and /ready answers 503 with an ERROR (Benthos's
// "Failed to connect") that says why and names the shard. Before, /ready
// answered 200 while nothing was read.
func TestNotReadyWhileNoShardCanBeRead(t *testing.T) {
	t.Parallel()
	const shard0 = "shardId-000000000000"
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "reader: polling")
	arn := srv.StreamARN("orders")
	ready := func(mux *http.ServeMux) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ready", nil))
		return rec.Code
	}

	first := fakeProduce(t, srv, "orders", "a", 10, 2)
	out1 := &inputtest.Collector{}
	mux1 := http.NewServeMux()
	p := inputtest.StartPipelineWith(t, conf, out1.Consume, inputtest.Options{Mux: mux1})
	out1.WaitFor(t, len(first), time.Minute)
	if code := ready(mux1); code != http.StatusOK {
		t.Fatalf("/ready answered %d while the shard is read, want 200", code)
	}
	p.Stop(t)

	bad := strings.Repeat("9", 56)
	setFilePosition(t, dir, arn, shard0, bad)

	logs := &inputtest.Logs{}
	mux2 := http.NewServeMux()
	inputtest.StartPipelineWith(t, conf, (&inputtest.Collector{}).Consume, inputtest.Options{Logs: logs, Mux: mux2})
	if !eventually(30*time.Second, func() bool {
		return ready(mux2) == http.StatusServiceUnavailable &&
			hasLine(logs.String(), "level=ERROR", "Failed to connect", "no shard can be read", shard0, "kinesis_shard_stopped")
	}) {
		t.Fatalf("/ready answered %d with the only shard stopped on %s, want 503 and an ERROR naming the shard; logs:\n%s", ready(mux2), bad, logs)
	}
}

// TestUnconfirmedShardEndIsNotTaken: a GetRecords answer without
// NextShardIterator on a shard that ListShards lists open is not the shard's
// end: it is warned about, counted, and the shard is read on after the
// answer's records; every record, written before and after, arrives once,
// and the checkpoint is no end.
//
// Before, the answer was taken as the shard's end and committed as ended:
// none of the shard's records ever arrived, before or after a restart, and
// only a debug line said anything.
func TestUnconfirmedShardEndIsNotTaken(t *testing.T) {
	t.Parallel()
	const shard0 = "shardId-000000000000"
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "reader: polling")
	want := fakeProduce(t, srv, "orders", "a", 10, 2)
	// The first answer carries the shard's first records and no
	// NextShardIterator: they are delivered, the end is not taken.
	recs, err := srv.ShardRecords("orders", shard0)
	if err != nil {
		t.Fatal(err)
	}
	var first []map[string]any
	for _, r := range recs[:4] {
		first = append(first, map[string]any{"SequenceNumber": *r.SequenceNumber, "Data": r.Data, "PartitionKey": *r.PartitionKey})
	}
	answer, err := json.Marshal(map[string]any{"Records": first, "MillisBehindLatest": 0})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	srv.Control("GetRecords", func(*kinesisfake.Request) (bool, int, []byte) {
		if calls.Add(1) != 1 {
			return false, 0, nil
		}
		return true, 200, answer
	})
	logs := &inputtest.Logs{}
	metrics := &inputtest.Metrics{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
	waitUntil(t, time.Minute, func() bool { return len(out.All()) >= len(want) })
	more := fakeProduce(t, srv, "orders", "b", 10, 2)
	for d, k := range more {
		want[d] = k
	}
	p.StopWhen(t, out, len(want), time.Minute)
	if calls.Load() < 2 {
		t.Fatal("the answer without NextShardIterator was not met: the test proves nothing")
	}
	inputtest.CheckDelivery(t, out.All(), want, true)
	inputtest.CheckOrder(t, out.All())
	if cp := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders")).Shards[shard0]; cp.Ended {
		t.Errorf("the open shard %s was committed as ended", shard0)
	}
	if n := metrics.Counter("kinesis_shard_ends_unconfirmed", "stream", "orders", "shard", shard0); n != 1 {
		t.Errorf("kinesis_shard_ends_unconfirmed is %d, want 1", n)
	}
	if !hasLine(logs.String(), "level=WARN", "shard "+shard0, "ListShards") {
		t.Errorf("the unconfirmed end is not warned about, naming the shard and ListShards:\n%s", logs.String())
	}
}

// TestReadWithABadSequenceNumberIsNotTaken: a GetRecords answer with a
// record whose sequence number is not one (1,000 digits) is refused at error
// level and read again; the record is neither delivered nor checkpointed,
// and every record arrives once.
//
// Before, the record was delivered and its sequence number saved as the
// checkpoint, which Kinesis refuses at the next start.
func TestReadWithABadSequenceNumberIsNotTaken(t *testing.T) {
	t.Parallel()
	const shard0 = "shardId-000000000000"
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "reader: polling")
	bad := strings.Repeat("7", 1000)
	var calls atomic.Int32
	srv.Control("GetRecords", func(r *kinesisfake.Request) (bool, int, []byte) {
		if calls.Add(1) != 1 {
			return false, 0, nil
		}
		var in struct{ ShardIterator string }
		if err := json.Unmarshal(r.Body, &in); err != nil {
			t.Error(err)
		}
		body, _ := json.Marshal(map[string]any{
			"Records":            []any{map[string]any{"SequenceNumber": bad, "Data": "Ym9ndXM=", "PartitionKey": "k"}},
			"NextShardIterator":  in.ShardIterator,
			"MillisBehindLatest": 0,
		})
		return true, 200, body
	})
	want := fakeProduce(t, srv, "orders", "a", 10, 2)
	logs := &inputtest.Logs{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs})
	p.StopWhen(t, out, len(want), time.Minute)
	if calls.Load() < 2 {
		t.Fatal("the bad answer was not met: the test proves nothing")
	}
	inputtest.CheckDelivery(t, out.All(), want, true)
	if cp := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders")).Shards[shard0]; cp.Position == nil || len(cp.Position.Sequence) > 129 {
		t.Errorf("checkpoint of %s: %+v", shard0, cp.Position)
	}
	if !hasLine(logs.String(), "level=ERROR", "not a Kinesis sequence number") {
		t.Errorf("the bad sequence number is not an error:\n%s", logs.String())
	}
}
