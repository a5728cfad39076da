package read

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Helpers shared by the package's tests: an Env as the component builds
// one, a scripted publisher, and a harness that runs one Stream against the
// fake with no input around it.

func pos(n int) checkpoint.Position { return checkpoint.Position{Sequence: strconv.Itoa(n)} }

// testEnv is an Env with the input's defaults, reading from trim_horizon,
// its positions in store, its batches sent to out; edits change it.
func testEnv(store checkpoint.Store, out chan<- Delivery, edits ...func(*Env)) *Env {
	res := service.MockResources()
	env := &Env{
		Log:       res.Logger(),
		Metrics:   NewMetrics(res.Metrics()),
		Out:       out,
		Resources: res,
		Limits:    Limits{Checkpoint: 1024, Discovery: 10 * time.Second, ReplayNacks: true, Deaggregate: true},
		Start:     Start{Name: "trim_horizon"},
		Coord:     coord.NewLocal(store),
		Store: Store{
			Where:       "directory test",
			StreamFlags: func(arn string) string { return "--stream " + arn },
			SetCommand: func(arn, id string) string {
				return "run `benthos-kinesis checkpoint set --stream " + arn + " --shard " + id + "`"
			},
		},
	}
	for _, edit := range edits {
		edit(env)
	}
	return env
}

// scriptedPub is a Publisher made of one function field.
type scriptedPub struct {
	read func(ctx context.Context, shardID string, start shard.Start, deliver shard.Deliver) error
}

func (p scriptedPub) Read(ctx context.Context, shardID string, start shard.Start, _ shard.Room, deliver shard.Deliver) error {
	return p.read(ctx, shardID, start, deliver)
}

// streamHarness runs one Stream of the fake's stream "orders" (ListShards
// from the fake, records from the publisher given), and acknowledges every
// batch the moment it arrives, as ReadBatch and an output would.
type streamHarness struct {
	s      *Stream
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	got     []string // data of every message acknowledged
	flagged []string // data of those flagged out of their shard's range
	sizes   []int    // size of every batch handed out
}

func (h *streamHarness) data() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// outOfRange returns the data of the messages flagged out of their
// shard's range.
func (h *streamHarness) outOfRange() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.flagged...)
}

// stop ends the reader as Close does: stop, wait, commit.
func (h *streamHarness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	h.wg.Wait()
	if err := h.s.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// startStreamHarness starts the harness; mk makes the publisher with the
// fake's client, edits change the Env.
func startStreamHarness(t *testing.T, srv *kinesisfake.Server, store checkpoint.Store, mk func(*kinesis.Client) Publisher, edits ...func(*Env)) *streamHarness {
	t.Helper()
	return startStreamHarnessWith(t, srv, store, mk, func(*StreamConfig) {}, edits...)
}

// startStreamHarnessWith is startStreamHarness whose stream config edit
// changes first.
func startStreamHarnessWith(t *testing.T, srv *kinesisfake.Server, store checkpoint.Store, mk func(*kinesis.Client) Publisher, edit func(*StreamConfig), edits ...func(*Env)) *streamHarness {
	t.Helper()
	out := make(chan Delivery)
	env := testEnv(store, out, edits...)
	client := srv.NewClient()
	conf := StreamConfig{Name: "orders", ARN: srv.StreamARN("orders"), Client: client, Publisher: mk(client)}
	edit(&conf)
	h := &streamHarness{s: NewStream(env, conf)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	if err := h.s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.s.Run(ctx) }()
	go func() {
		defer h.wg.Done()
		for {
			select {
			case d := <-out:
				h.mu.Lock()
				h.sizes = append(h.sizes, len(d.Batch()))
				for _, m := range d.Batch() {
					b, _ := m.AsBytes()
					h.got = append(h.got, string(b))
					if v, ok := m.MetaGetMut(metaOutOfRange); ok && v == true {
						h.flagged = append(h.flagged, string(b))
					}
				}
				h.mu.Unlock()
				d.Ack(nil)
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { h.cancel(); h.wg.Wait() })
	return h
}

// publisher returns mk for a publisher that does not need the client.
func publisher(p Publisher) func(*kinesis.Client) Publisher {
	return func(*kinesis.Client) Publisher { return p }
}

// limit sets checkpoint.limit.
func limit(n int) func(*Env) { return func(e *Env) { e.Limits.Checkpoint = n } }

// discoverEvery sets shard_discovery_interval.
func discoverEvery(d time.Duration) func(*Env) { return func(e *Env) { e.Limits.Discovery = d } }

func reviewRecord(seq, data string) types.Record {
	return types.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte(data)}
}

// testGrant is a grant that lapses at lapse.
type testGrant struct{ lapse time.Time }

func (testGrant) Start() checkpoint.Checkpoint { return checkpoint.Checkpoint{} }

func (testGrant) Acked(checkpoint.Position) {}

func (testGrant) Ended(context.Context, *checkpoint.Position) error { return nil }

func (testGrant) Read(int, time.Time) {}

func (g testGrant) Until() time.Time { return g.lapse }

func (testGrant) Stopped(context.Context, func(context.Context) error) {}
