package input

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// TestRecreatedStreamWithRegistrationNone: with efo.registration none
// the input never describes the stream, so streamReader.created stays zero and
// load's "deleted and created again" check is skipped. Before the fix (a
// check of each shard's starting sequence number at discovery), a stream
// deleted and created again under the same name (and a new consumer ARN in the
// config) inherited the old stream's checkpoints: its shardId-000000000000 was
// taken for the old, ended one and never read. Silent loss.
//
// The harness builds the streamReader as prepareStream does for registration
// none (no describe, zero creation time); it reads by polling for brevity.
func TestRecreatedStreamWithRegistrationNone(t *testing.T) {
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	mkPolling := func(in *kinesisInput, client *kinesis.Client) recordPublisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	}
	for i := 0; i < 3; i++ {
		if _, _, err := srv.Put("orders", "k", []byte(fmt.Sprintf("old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.SplitShard("orders", "shardId-000000000000", ""); err != nil {
		t.Fatal(err)
	}

	// First life of the stream: shard 0 is read to its end.
	store1, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := startStreamHarnessWith(t, srv, "", store1, mkPolling)
	waitUntil(t, 20*time.Second, func() bool {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return h.s.state.Shards["shardId-000000000000"].Ended
	})
	h.stop(t)
	store1.Close()

	// The stream is deleted and created again, with new records.
	if err := srv.DeleteStream("orders"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, func() bool { return srv.CreateStream("orders", 1) == nil })
	for i := 0; i < 3; i++ {
		if _, _, err := srv.Put("orders", "k", []byte(fmt.Sprintf("new-%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	store2, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	h2 := startStreamHarnessWith(t, srv, "", store2, mkPolling)
	if !eventually(time.Minute, func() bool { return slices.Contains(h2.data(), "new-0") }) {
		got := h2.data()
		h2.s.mu.Lock()
		cp := h2.s.state.Shards["shardId-000000000000"]
		h2.s.mu.Unlock()
		t.Fatalf("the recreated stream's records were never read (got %q); its shardId-000000000000 carries the old stream's checkpoint %+v", got, cp)
	}
}
