package inputtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Got is one message as the pipeline's output saw it.
type Got struct {
	Stream, Shard, Seq, Sub, PK, Data string
	// Err is the message's error flag, DeaggErr its kinesis_deaggregation_error.
	Err, DeaggErr string
	// OutOfRange tells that its kinesis_hash_key_out_of_range is the
	// boolean true (any other value, e.g. the string "true", is not).
	OutOfRange bool
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
	// Hold, when set, keeps every batch waiting until it is closed.
	Hold <-chan struct{}
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
		v, _ := m.MetaGetMut("kinesis_hash_key_out_of_range")
		batch[i].OutOfRange = v == true
		if err := m.GetError(); err != nil {
			batch[i].Err = err.Error()
		}
	}
	if c.Hold != nil {
		select {
		case <-c.Hold:
		case <-ctx.Done():
			return ctx.Err()
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

// AcceptOnly makes the collector accept batches until it holds at least n
// messages and reject every batch after that, so that a run stops at a known
// place however fast the machine is. It replaces Reject.
func (c *Collector) AcceptOnly(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Reject = func([]Got) bool { return len(c.msgs) >= n }
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
