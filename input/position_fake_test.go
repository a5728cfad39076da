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
)

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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
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
	inputtest.WaitUntil(t, time.Minute, func() bool {
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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
	if !inputtest.Eventually(30*time.Second, func() bool {
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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
	inputtest.WaitUntil(t, time.Minute, func() bool { return len(out.All()) >= len(want) })
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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
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
