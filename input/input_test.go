package input

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestCloseBoundsDeregister: with efo.deregister_on_close, a
// DeregisterStreamConsumer call that the endpoint accepts and never answers
// no longer holds Close: it gives up after the input's deregister timeout,
// saying that the consumer may still be registered and how to remove it.
//
// Before the fix Close passed Benthos' context (context.Background()) to the
// call and waited for ever: here, until the fake's hour-long hold.
func TestCloseBoundsDeregister(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	in, err := newTestInput(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app, deregister_on_close: true }"))
	if err != nil {
		t.Fatal(err)
	}
	in.deregisterTimeout = 300 * time.Millisecond
	if err := in.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	arn := srv.ConsumerARN("orders", "app")
	if arn == "" {
		t.Fatal("Connect registered no consumer")
	}
	srv.DelayNext("DeregisterStreamConsumer", 1, time.Hour)

	done := make(chan error, 1)
	go func() { done <- in.Close(context.Background()) }()
	var closeErr error
	select {
	case closeErr = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return within 20 s of being called while DeregisterStreamConsumer got no answer")
	}
	if srv.Calls("DeregisterStreamConsumer") == 0 {
		t.Fatal("Close made no DeregisterStreamConsumer call: the test proves nothing")
	}
	if closeErr == nil {
		t.Fatal("Close returned no error though the consumer was not deregistered")
	}
	for _, want := range []string{arn, "may still be registered", "benthos-kinesis efo deregister --stream " + srv.StreamARN("orders") + " --consumer-name app"} {
		if !strings.Contains(closeErr.Error(), want) {
			t.Errorf("Close's error does not say %q: %v", want, closeErr)
		}
	}
	t.Logf("Close: %v", closeErr)
	if srv.ConsumerARN("orders", "app") != arn {
		t.Error("the consumer is gone though its deregistration got no answer")
	}
}

// testGrant is a grant that lapses at lapse.
type testGrant struct{ lapse time.Time }

func (testGrant) Start() checkpoint.Checkpoint                         { return checkpoint.Checkpoint{} }
func (testGrant) Acked(checkpoint.Position)                            {}
func (testGrant) Ended(context.Context, *checkpoint.Position) error    { return nil }
func (testGrant) Read(int, time.Time)                                  {}
func (g testGrant) Until() time.Time                                   { return g.lapse }
func (testGrant) Stopped(context.Context, func(context.Context) error) {}

// TestReadBatchWithholdsABatchWhoseLeaseLapsed: after a pause of the
// process (SIGSTOP, a long GC), emit's send and its lapse timer can both be
// ready, and Go's select picks either: a batch may reach ReadBatch after
// its lease lapsed. ReadBatch does not hand it out: it resolves it as never
// handed out (the checkpoint stays before it, nobody waits for it) and
// hands out the next batch. Before the fix its reader read on behind a
// checkpoint frozen before the withheld batch, and what it handed out since
// came again after the lease's next move (115 duplicates in
// TestLeasesKinesisLocal under load).
func TestReadBatchWithholdsABatchWhoseLeaseLapsed(t *testing.T) {
	t.Parallel()
	in := replayTestInput(false)
	defer in.cancel()
	var stopped atomic.Value
	r := &shardReader{s: &streamReader{in: in}, tracker: newAckTracker(10), g: testGrant{}, stop: func(err error) { stopped.Store(err) }}
	e := r.tracker.TryTrack(pos(1), 1)
	go func() {
		in.out <- delivery{batch: replayTestBatch("lapsed"), r: r, e: e}
		in.out <- replayTestDelivery(in, "live")
	}()
	if d, _ := replayTestRead(t, in); d != "live" {
		t.Fatalf("ReadBatch handed out %q, want the batch after the lapsed one", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := r.tracker.Settled(ctx); err != nil {
		t.Fatal("the withheld batch is still waited for")
	}
	if cp := r.tracker.Checkpoint(); cp != nil {
		t.Fatalf("the checkpoint moved past a batch never handed out: %v", cp)
	}
	// Its reader stops: one that read on would hand out records behind a
	// checkpoint that can no longer pass the withheld batch.
	if err, _ := stopped.Load().(error); !errors.Is(err, errLapsed) {
		t.Fatalf("the reader of the withheld batch was stopped with %v, want %v", err, errLapsed)
	}
}
