package input

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestBatchPolicyProcessorErrorsAreDelivered: a processor of the batch
// policy that fails flags the messages with its error (Benthos' way); they
// are delivered and acknowledged like any other, the checkpoint moves on,
// and nothing says auto_replay_nacks is false (it is not).
func TestBatchPolicyProcessorErrorsAreDelivered(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "r", 50, 3)
	dir := t.TempDir()
	out := &inputtest.Collector{}
	logs := &inputtest.Logs{}
	conf := fakeInput(srv, "orders", dir, `reader: polling
batching:
  count: 10
  period: 50ms
  processors:
    - mapping: 'root = if content().string().has_suffix("7") { throw("no sevens") } else { content() }'`)
	p := inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs})
	p.StopWhen(t, out, len(want), time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	flagged := 0
	for _, m := range msgs {
		if (m.Err != "") != strings.HasSuffix(m.Data, "7") {
			t.Fatalf("record %s: error flag %q", m.Data, m.Err)
		}
		if m.Err != "" {
			flagged++
		}
	}
	if flagged != 5 {
		t.Fatalf("%d records flagged, want 5", flagged)
	}
	cps := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))
	for _, m := range msgs {
		if inputtest.AfterCheckpoint(m, cps) {
			t.Fatalf("record %s is after the final checkpoint %+v: the flagged records held it", m.Data, cps.Shards)
		}
	}
	if strings.Contains(logs.String(), "auto_replay_nacks is false") {
		t.Fatalf("logged that auto_replay_nacks is false, which it is not:\n%s", logs)
	}
}

// TestStopDuringBatchPolicyFlushLosesNothing: Benthos drops a batch whose
// policy processors are interrupted by the end of their context (v4.60.0
// logs "the batch has been dropped" and returns nothing), as on a stop while
// a slow processor runs. Before the fix the input took the empty result for
// "the processors dropped every message" and acknowledged the records: the
// checkpoint passed them and they were lost at the restart.
func TestStopDuringBatchPolicyFlushLosesNothing(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "r", 5, 2)
	dir := t.TempDir()
	metrics := &inputtest.Metrics{}
	out := &inputtest.Collector{}
	slow := fakeInput(srv, "orders", dir, `reader: polling
batching:
  count: 5
  processors:
    - sleep: { duration: 1m }`)
	p := inputtest.StartPipelineWith(t, slow, out.Consume, inputtest.Options{Metrics: metrics})
	inputtest.WaitUntil(t, 30*time.Second, func() bool { return metrics.Counter("kinesis_records_read") >= 5 })
	p.Stop(t)
	if n := out.Count(); n != 0 {
		t.Fatalf("%d records delivered through a processor sleeping a minute", n)
	}
	cps := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))
	for id, cp := range cps.Shards {
		if cp.Position != nil {
			t.Fatalf("shard %s checkpointed at %v, past records that never reached the output", id, cp.Position)
		}
	}

	out2 := &inputtest.Collector{}
	p2 := inputtest.StartPipeline(t, fakeInput(srv, "orders", dir, "reader: polling"), out2)
	p2.StopWhen(t, out2, len(want), 30*time.Second)
	inputtest.CheckDelivery(t, out2.All(), want, true)
}

// TestAShardReadsOneReadAhead: while the pipeline holds a shard's first
// batch unacknowledged, the shard holds its first read and fetches no
// other: its next read is fetched only once the reader is on the first
// one's last part. Before the fix the publisher fetched the next read at
// once and a reader held up to three reads of converted messages per shard
// (the peak memory of a backlog drain). Then everything arrives, in order.
func TestAShardReadsOneReadAhead(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	want := fakeProduce(t, srv, "orders", "a", 3000, 7)
	hold := make(chan struct{})
	out := &inputtest.Collector{Hold: hold}
	conf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 100 }", "reader: polling\npolling: { interval: 200ms, limit: 1000 }")
	p := inputtest.StartPipeline(t, conf, out)
	inputtest.WaitUntil(t, 30*time.Second, func() bool { return srv.Calls("GetRecords") >= 1 })
	// Five polling intervals: time enough for any fetch ahead to be made.
	time.Sleep(5 * 200 * time.Millisecond)
	if n := srv.Calls("GetRecords"); n != 1 {
		t.Fatalf("%d GetRecords calls while the first batch of the first read waits for the pipeline, want 1", n)
	}
	close(hold)
	p.StopWhen(t, out, len(want), time.Minute)
	inputtest.CheckDelivery(t, out.All(), want, true)
	inputtest.CheckOrder(t, out.All())
}

// Before, a checkpoint file holding "not-a-number" as one shard's position
// had the shard's reader retry GetShardIterator for ever on an error naming
// neither the file nor the fix. Now that shard alone is left unread, with an
// ERROR naming the file, the value and `checkpoint set`; the other shard is
// read; and once the shard is set again every record of it arrives once.
func TestMalformedCheckpointStopsOnlyItsShard(t *testing.T) {
	t.Parallel()
	testMalformedCheckpoint(t, "not-a-number", []string{"position.sequence_number", "not-a-number"})
}

func testMalformedCheckpoint(t *testing.T, seq string, want []string) {
	const shard0, shard1 = "shardId-000000000000", "shardId-000000000001"
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "reader: polling")
	arn := srv.StreamARN("orders")
	path := filepath.Join(dir, "us-east-1.000000000000.orders.json")
	doc := `{"version": 1, "stream_arn": "` + arn + `", "stream_created": "0001-01-01T00:00:00Z", "shards": {
  "` + shard0 + `": {"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "` + seq + `"}},
  "` + shard1 + `": {"start": {"kind": "TRIM_HORIZON"}}}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	produced := fakeProducePerShard(t, srv, "orders", "a", 10, 2)
	of := func(prefix string) inputtest.Produced {
		out := inputtest.Produced{}
		for data, pk := range produced {
			if strings.HasPrefix(data, prefix) {
				out[data] = pk
			}
		}
		return out
	}

	logs := &inputtest.Logs{}
	metrics := &inputtest.Metrics{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
	out.WaitFor(t, 10, time.Minute)
	inputtest.WaitUntil(t, time.Minute, func() bool { return strings.Contains(logs.String(), "not read") })
	p.Stop(t)
	inputtest.CheckDelivery(t, out.All(), of("a-1-"), true)
	if containsShard(out.All(), shard0) {
		t.Fatal("records of the shard with the malformed checkpoint were read")
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "not read") {
			line = l
		}
	}
	for _, w := range append([]string{"level=ERROR", "shard " + shard0, path, "benthos-kinesis checkpoint set --dir " + dir}, want...) {
		if !strings.Contains(line, w) {
			t.Errorf("the log line does not name %q: %s", w, line)
		}
	}
	if strings.Contains(logs.String(), "GetShardIterator") {
		t.Errorf("the malformed position was sent to the service:\n%s", logs.String())
	}
	if n := metrics.Counter("kinesis_broken_checkpoints", "stream", "orders"); n != 1 {
		t.Errorf("kinesis_broken_checkpoints is %d, want 1", n)
	}
	// The stored value is kept for the operator to see, not replaced.
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"`+seq+`"`) {
		t.Fatalf("the malformed position was overwritten:\n%s", data)
	}

	// What `checkpoint set --shard shard0 --to-trim-horizon` writes.
	editFileCheckpoints(t, dir, arn, func(st *checkpoint.Stream) {
		st.Shards[shard0] = checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}
	})

	out2 := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, out2)
	p.StopWhen(t, out2, 10, time.Minute)
	inputtest.CheckDelivery(t, out2.All(), of("a-0-"), true)
}
