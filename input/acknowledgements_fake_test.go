package input

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// TestFreezeDoesNotStopTheShard: a whole pipeline with
// auto_replay_nacks false, checkpoint.limit 10 and reads of 10 records. The
// output rejects the batch holding r-0000003 once; that record is not
// delivered again in this run, but the other 90 are.
func TestFreezeDoesNotStopTheShard(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "r", 100, 1)
	conf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 10 }", "reader: polling\npolling: { limit: 10 }\nauto_replay_nacks: false")
	out := &inputtest.Collector{}
	var once sync.Once
	out.Reject = func(b []inputtest.Got) bool {
		rejected := false
		for _, m := range b {
			if m.Data == "r-0000003" {
				once.Do(func() { rejected = true })
			}
		}
		return rejected
	}
	p := inputtest.StartPipeline(t, conf, out)
	ok := inputtest.Eventually(10*time.Second, func() bool { return out.Count() >= 90 })
	n := out.Count()
	p.Stop(t)
	if !ok {
		t.Fatalf("after one rejected batch of 10 with auto_replay_nacks false, only %d of the 90 later records were delivered in 10 s: the shard stopped", n)
	}
}

// countBatchSink is an output with its own batch policy (Benthos' output batcher
// in front of it), as e.g. aws_s3, kafka or http_client outputs have. fail,
// when set, may fail one message of a write (a service.BatchError naming it;
// the others are written).
type countBatchSink struct {
	mu      sync.Mutex
	data    []string
	batches []int
	fail    func(b service.MessageBatch) (int, error) // the index of the message that failed
}

func (s *countBatchSink) Connect(context.Context) error { return nil }

func (s *countBatchSink) Close(context.Context) error { return nil }

func (s *countBatchSink) WriteBatch(_ context.Context, b service.MessageBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed, err := -1, error(nil)
	if s.fail != nil {
		failed, err = s.fail(b)
	}
	s.batches = append(s.batches, len(b))
	for i, m := range b {
		if i != failed {
			d, _ := m.AsBytes()
			s.data = append(s.data, string(d))
		}
	}
	if err != nil {
		return service.NewBatchError(b, err).Failed(failed, err)
	}
	return nil
}

func (s *countBatchSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data)
}

// runCountBatchStream runs a whole Benthos stream: the input's YAML, the pipeline
// section given, and sink as the output with batching { count: outCount } and
// no period. It waits until sink holds want records and fails the test if
// they do not come within 10 s. (The last records read may stay in a partial
// output batch for good: want leaves room for them.)
func runCountBatchStream(t *testing.T, inConf, pipeline string, outCount int, sink *countBatchSink, want int, why string, during func()) {
	t.Helper()
	env := service.NewEnvironment()
	spec := service.NewConfigSpec().Fields(service.NewBatchPolicyField("batching"))
	err := env.RegisterBatchOutput("count_batch_out", spec, func(conf *service.ParsedConfig, _ *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
		pol, err := conf.FieldBatchPolicy("batching")
		return sink, pol, 1, err
	})
	if err != nil {
		t.Fatal(err)
	}
	sb := env.NewStreamBuilder()
	if err := sb.SetLoggerYAML("level: warn"); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
input:
  aws_kinesis_streams:
%s
pipeline:
%s
output:
  count_batch_out:
    batching: { count: %d }
`, inputtest.Indent(strings.TrimSpace(inConf), "    "), inputtest.Indent(strings.TrimSpace(pipeline), "  "), outCount)
	if err := sb.SetYAML(yaml); err != nil {
		t.Fatal(err)
	}
	s, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	defer func() {
		// A partial output batch with no period holds Benthos' own shutdown
		// until its timeout (the input waits for pending acks first).
		_ = s.StopWithin(3 * time.Second)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the stream did not stop")
		}
	}()
	if during != nil {
		during()
	}
	if !inputtest.Eventually(10*time.Second, func() bool { return sink.count() >= want }) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		t.Errorf("%s: the shard stalled, %d of %d records written in 10 s, in output batches %v: %v", why, len(sink.data), want, sink.batches, sink.data)
	}
}

// TestOutOfOrderAcksIntoCountBatchingOutputDoNotStall: a real Benthos stream,
// pipeline.threads 2, an output with batching { count: 4 } (no period), one
// shard, checkpoint.limit 10, one record per input batch. The first record is
// slow to process (1 s, e.g. an HTTP enrichment), so records 2-9 overtake it
// and are written and acknowledged; 10 and then 1 wait in the output's batch
// for two more, which the shard must be free to read (2 records are
// unacknowledged).
func TestOutOfOrderAcksIntoCountBatchingOutputDoNotStall(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "r", 40, 1)
	// check: true flushes every record: one record per input batch (count: 1 is a no-op policy).
	inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 10 }", "reader: polling\nbatching: { check: 'true' }")
	runCountBatchStream(t, inConf, `
threads: 2
processors:
  - switch:
      - check: 'content().string() == "r-0000000"'
        processors:
          - sleep: { duration: 1s }
`, 4, &countBatchSink{}, 36, "pipeline.threads 2, output batching count 4, checkpoint.limit 10", nil)
}

// TestReplayIntoCountBatchingOutputDoesNotStall: the default settings
// (auto_replay_nacks true, one pipeline thread), an output with batching
// { count: 4 } (no period) that fails one message of its first two writes
// (a service.BatchError naming r-0000000: a transient error). The other
// messages of those writes are acknowledged. The replay of r-0000000 lands
// in a partial output batch that waits for more messages, which the shard
// must be free to read although the checkpoint cannot pass r-0000000 yet.
func TestReplayIntoCountBatchingOutputDoesNotStall(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "r", 40, 1)
	inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 9 }", "reader: polling\nbatching: { check: 'true' }")
	failures := 0
	sink := &countBatchSink{fail: func(b service.MessageBatch) (int, error) {
		for i, m := range b {
			if d, _ := m.AsBytes(); string(d) == "r-0000000" && failures < 2 {
				failures++
				return i, errors.New("r-0000000: transient failure")
			}
		}
		return -1, nil
	}}
	runCountBatchStream(t, inConf, "threads: 1", 4, sink, 36, "auto_replay_nacks, output batching count 4, checkpoint.limit 9, r-0000000 failing twice", nil)
}

// TestSmallThenLargeReadIntoCountBatchingOutputDoesNotStall: one pipeline
// thread, in order, no failure, an output with batching { count: 4 }, one
// shard, checkpoint.limit 10. A small read (3 records, e.g. at the tip of the
// shard) waits in the output's partial batch; the next read is larger than
// the room left (10 + 3 > 10) and is emitted as one batch, which Track never
// admits: it would need the 3 acknowledged, which needs 1 more message.
// emitRead splits the read by the room left, which lets it through.
func TestSmallThenLargeReadIntoCountBatchingOutputDoesNotStall(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
	fakeProduce(t, srv, "orders", "a", 3, 1)
	inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"', commit_period: 100ms, limit: 10 }", "reader: polling")
	runCountBatchStream(t, inConf, "threads: 1", 4, &countBatchSink{}, 29, "reads of 3 then 30 records, output batching count 4, checkpoint.limit 10", func() {
		time.Sleep(2 * time.Second) // the 3 records wait in the output's batch
		fakeProduce(t, srv, "orders", "b", 30, 1)
	})
}
