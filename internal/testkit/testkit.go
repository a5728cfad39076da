// Package testkit holds what the integration tests of several packages share:
// a whole test pipeline, a recording output, a producer and the checks of
// delivery and order. Only tests import it.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// Got is one message as the pipeline's output saw it.
type Got struct {
	Stream, Shard, Seq, Sub, PK, Data string
	// Err is the message's error flag, DeaggErr its kinesis_deaggregation_error.
	Err, DeaggErr string
}

func (g Got) Position() checkpoint.Position {
	p := checkpoint.Position{Sequence: g.Seq}
	if g.Sub != "" {
		p.SubSequence, _ = strconv.ParseInt(g.Sub, 10, 64)
	}
	return p
}

// Collector is the output of a test pipeline: it records every message it
// acknowledges, and may reject (nack) batches.
type Collector struct {
	mu      sync.Mutex
	msgs    []Got
	batches []int // sizes of the accepted batches
	// Reject, when set, is asked about every batch; a true answer nacks it
	// (and the batch is not recorded).
	Reject func(batch []Got) bool
	// Slow delays every batch, simulating a slow output.
	Slow time.Duration
}

func (c *Collector) Consume(ctx context.Context, b service.MessageBatch) error {
	batch := make([]Got, len(b))
	for i, m := range b {
		data, err := m.AsBytes()
		if err != nil {
			return err
		}
		meta := func(k string) string { v, _ := m.MetaGet(k); return v }
		batch[i] = Got{
			Stream: meta("kinesis_stream"), Shard: meta("kinesis_shard"), Seq: meta("kinesis_sequence_number"),
			Sub: meta("kinesis_sub_sequence_number"), PK: meta("kinesis_partition_key"), Data: string(data),
			DeaggErr: meta("kinesis_deaggregation_error"),
		}
		if err := m.GetError(); err != nil {
			batch[i].Err = err.Error()
		}
	}
	if c.Slow > 0 {
		select {
		case <-time.After(c.Slow):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Reject != nil && c.Reject(batch) {
		return fmt.Errorf("rejected a batch of %d starting at %s", len(batch), batch[0].Seq)
	}
	c.msgs = append(c.msgs, batch...)
	c.batches = append(c.batches, len(batch))
	return nil
}

// BatchSizes returns the sizes of the batches accepted so far.
func (c *Collector) BatchSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.batches...)
}

// Lock and Unlock hold the collector still (Reject runs under the lock), e.g.
// to read state that Reject writes.
func (c *Collector) Lock()   { c.mu.Lock() }
func (c *Collector) Unlock() { c.mu.Unlock() }

// Msgs returns the recorded messages; call it under Lock.
func (c *Collector) Msgs() []Got { return c.msgs }

func (c *Collector) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *Collector) All() []Got {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Got(nil), c.msgs...)
}

// WaitFor waits until the collector holds at least n messages.
func (c *Collector) WaitFor(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.Count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d messages arrived within %v", c.Count(), n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pipeline is a whole Benthos stream: our input, the collector as output.
type Pipeline struct {
	stream *service.Stream
	done   chan error
}

// StartPipeline builds a stream from the input's YAML (the fields under
// aws_kinesis_streams) and runs it.
func StartPipeline(t testing.TB, inputYAML string, out *Collector) *Pipeline {
	t.Helper()
	return StartPipelineLogged(t, inputYAML, out, nil)
}

// StartPipelineLogged is StartPipeline with the pipeline's logs, from level
// info up, written to logs (nil: warnings and errors to stdout).
func StartPipelineLogged(t testing.TB, inputYAML string, out *Collector, logs io.Writer) *Pipeline {
	t.Helper()
	sb := service.NewStreamBuilder()
	if logs != nil {
		sb.SetLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	} else {
		sb.SetLoggerYAML("level: warn")
	}
	if err := sb.AddInputYAML("aws_kinesis_streams:\n" + Indent(strings.TrimSpace(inputYAML), "  ")); err != nil {
		t.Fatal(err)
	}
	if err := sb.AddBatchConsumerFunc(out.Consume); err != nil {
		t.Fatal(err)
	}
	s, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{stream: s, done: make(chan error, 1)}
	go func() { p.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Stop stops the pipeline cleanly: the input stops reading, pending acks
// are waited for, and the input's Close commits.
func (p *Pipeline) Stop(t testing.TB) {
	t.Helper()
	if p.stream == nil {
		return
	}
	if err := p.stream.StopWithin(30 * time.Second); err != nil {
		t.Errorf("stopping the pipeline: %v", err)
	}
	<-p.done
	p.stream = nil
}

// Produced is what a test wrote: data -> partition key.
type Produced map[string]string

// Produce writes n records to a stream in PutRecords calls of up to 500, with
// data "<prefix>-<index>" and partition keys spread over keys values.
func Produce(t testing.TB, client *kinesis.Client, streamName, prefix string, n, keys int) Produced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := Produced{}
	for start := 0; start < n; start += 500 {
		var entries []types.PutRecordsRequestEntry
		for i := start; i < n && i < start+500; i++ {
			data := fmt.Sprintf("%s-%07d", prefix, i)
			pk := fmt.Sprintf("key-%d", i%keys)
			out[data] = pk
			entries = append(entries, types.PutRecordsRequestEntry{Data: []byte(data), PartitionKey: aws.String(pk)})
		}
		for len(entries) > 0 {
			res, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(streamName), Records: entries})
			if err != nil {
				t.Fatalf("putting records: %v", err)
			}
			var retry []types.PutRecordsRequestEntry
			for i, r := range res.Records {
				if r.ErrorCode != nil {
					retry = append(retry, entries[i])
				}
			}
			entries = retry
		}
	}
	return out
}

// CreateStream creates a stream and waits until it is ACTIVE.
func CreateStream(t testing.TB, client *kinesis.Client, name string, shards int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	w := kinesis.NewStreamExistsWaiter(client, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// CheckDelivery asserts that every produced record arrived, nothing else did,
// and (when exactlyOnce) none twice.
func CheckDelivery(t testing.TB, msgs []Got, want Produced, exactlyOnce bool) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range msgs {
		if _, ok := want[m.Data]; !ok {
			t.Fatalf("unexpected record %q (stream %s shard %s seq %s)", m.Data, m.Stream, m.Shard, m.Seq)
		}
		if want[m.Data] != m.PK {
			t.Fatalf("record %q has partition key %q, want %q", m.Data, m.PK, want[m.Data])
		}
		seen[m.Data]++
	}
	var missing, dup []string
	for d := range want {
		switch {
		case seen[d] == 0:
			missing = append(missing, d)
		case seen[d] > 1 && exactlyOnce:
			dup = append(dup, fmt.Sprintf("%s x%d", d, seen[d]))
		}
	}
	sort.Strings(missing)
	sort.Strings(dup)
	if len(missing) > 0 {
		t.Fatalf("%d of %d records lost, e.g. %v", len(missing), len(want), Head(missing))
	}
	if len(dup) > 0 {
		t.Fatalf("%d records delivered more than once, e.g. %v", len(dup), Head(dup))
	}
}

// CheckOrder asserts that, within one run, each shard's records arrived in
// sequence order, and each partition key's records in the order produced.
func CheckOrder(t testing.TB, msgs []Got) {
	t.Helper()
	lastSeq := map[string]Got{}
	lastData := map[string]string{}
	for _, m := range msgs {
		key := m.Stream + "/" + m.Shard
		if prev, ok := lastSeq[key]; ok && !prev.Position().Less(m.Position()) {
			t.Fatalf("shard %s out of order: %s/%s after %s/%s", key, m.Seq, m.Sub, prev.Seq, prev.Sub)
		}
		lastSeq[key] = m
		pk := m.Stream + "/" + m.PK
		if prev, ok := lastData[pk]; ok && prev >= m.Data {
			t.Fatalf("partition key %s out of order: %s after %s", pk, m.Data, prev)
		}
		lastData[pk] = m.Data
	}
}

func Head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// ReadCheckpoints loads the checkpoint file of a stream from dir.
func ReadCheckpoints(t testing.TB, dir, streamARN string) checkpoint.Stream {
	t.Helper()
	f, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := f.Load(context.Background(), streamARN)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ReadCheckpointsUnlocked reads a stream's checkpoint file while its owner
// may hold the lock (the file is replaced atomically, so a read sees a whole
// version).
func ReadCheckpointsUnlocked(t testing.TB, dir, streamARN string) checkpoint.Stream {
	t.Helper()
	f, _ := checkpoint.OpenFile(t.TempDir())
	name := filepath.Base(f.Path(streamARN))
	data, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return checkpoint.Stream{}
	}
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadCheckpoints(t, tmp, streamARN)
}

// AfterCheckpoint reports whether m lies after the checkpoint of its shard.
func AfterCheckpoint(m Got, cps checkpoint.Stream) bool {
	cp, ok := cps.Shards[m.Shard]
	if !ok || cp.Position == nil {
		return true
	}
	if cp.Ended {
		return false
	}
	return cp.Position.Less(m.Position())
}

// Indent prefixes every line of s with prefix.
func Indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// Logs is a log sink safe for a pipeline's goroutines.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
