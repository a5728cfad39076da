package input

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/redpanda-data/benthos/v4/public/service"
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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
	lapsed := &testDelivery{batch: replayTestBatch("lapsed"), lapsed: true}
	go func() {
		in.out <- lapsed
		in.out <- replayTestDelivery("live")
	}()
	if d, _ := replayTestRead(t, in); d != "live" {
		t.Fatalf("ReadBatch handed out %q, want the batch after the lapsed one", d)
	}
	// What a withdrawn batch does to its reader: read's
	// TestWithdrawnBatchIsSettledAndStopsItsReader.
	if w, acks := lapsed.outcome(); !w || len(acks) != 0 {
		t.Fatalf("the lapsed batch was withdrawn: %v, acknowledged %v; want withdrawn and never acknowledged", w, acks)
	}
}

// testDelivery is a batch of a shard reader played by the test.
type testDelivery struct {
	batch  service.MessageBatch
	lapsed bool

	mu        sync.Mutex
	acks      []error
	withdrawn bool
}

func (d *testDelivery) Batch() service.MessageBatch { return d.batch }
func (d *testDelivery) Lapsed(time.Time) bool       { return d.lapsed }

func (d *testDelivery) Ack(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.acks = append(d.acks, err)
}

func (d *testDelivery) Withdraw() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.withdrawn = true
}

// outcome is whether the batch was withdrawn, and its acknowledgements.
func (d *testDelivery) outcome() (bool, []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.withdrawn, append([]error(nil), d.acks...)
}
