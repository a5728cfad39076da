package read

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// TestShardReaderGivesBackEveryByteOfRoom drives one shard reader, with no
// component around it, against the fake by polling, under a memory budget:
// from its start, from a trimmed start, on a refused position, to the
// shard's end, through a lapse of its grant, and stopped inside a read
// converted a part at a time. Whatever way it stops, once what it handed
// out is resolved every byte of room it took is back in the budget, and it
// delivered what it should, in order.
func TestShardReaderGivesBackEveryByteOfRoom(t *testing.T) {
	t.Parallel()
	const shard0 = "shardId-000000000000"
	for _, tc := range []struct {
		name string
		// records written before the reader starts.
		records int
		// prepare sets the shard up and returns the reader's start.
		prepare func(t *testing.T, srv *kinesisfake.Server, seqs []string) checkpoint.Checkpoint
		// lapse is how long the grant lasts; 0: it never lapses.
		lapse time.Duration
		// take is how many records the pipeline takes (0: all there are):
		// it acknowledges every batch at once but the one that completes
		// take, which it resolves only once the reader stopped (with
		// ackAll, at once too).
		take   int
		ackAll bool
		// cancel: the reader is stopped once take records were taken (or,
		// with take 0, once the shard is stopped on its position); else it
		// stops by itself.
		cancel bool
		// want are the indexes of the records delivered, in order; ended:
		// the reader reports the shard's end.
		want  []int
		ended bool
	}{
		{name: "start", records: 30, take: 30, cancel: true, want: span(0, 30)},
		{name: "trimmed start", records: 30, take: 20, cancel: true, want: span(10, 30),
			prepare: func(t *testing.T, srv *kinesisfake.Server, seqs []string) checkpoint.Checkpoint {
				if _, err := srv.TrimShard("orders", shard0, 10); err != nil {
					t.Fatal(err)
				}
				return checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: seqs[4]}}
			}},
		{name: "refused position", records: 30, cancel: true,
			prepare: func(t *testing.T, srv *kinesisfake.Server, seqs []string) checkpoint.Checkpoint {
				refuseSequenceStarts(srv, shard0)
				return checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: seqs[4]}}
			}},
		{name: "end", records: 30, want: span(0, 30), ended: true,
			prepare: func(t *testing.T, srv *kinesisfake.Server, _ []string) checkpoint.Checkpoint {
				if _, err := srv.SplitShard("orders", shard0, ""); err != nil {
					t.Fatal(err)
				}
				return checkpoint.Checkpoint{Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}}
			}},
		// The pipeline takes the first batch and no more: the reader waits
		// to hand out the second until its grant lapses.
		{name: "lapse", records: 30, take: 10, ackAll: true, lapse: time.Second, want: span(0, 10)},
		// One read of 100 records, converted 10 at a time: the reader is
		// stopped while it holds 90 unconverted.
		{name: "stop inside a read of many parts", records: 100, take: 10, cancel: true, want: span(0, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
			client := srv.NewClient()
			var seqs []string
			for i := range tc.records {
				data := fmt.Sprintf("r-%04d-%s", i, strings.Repeat("x", 1024))
				_, seq, err := srv.Put("orders", "k", []byte(data))
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, seq)
			}
			start := checkpoint.Checkpoint{Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}}
			if tc.prepare != nil {
				start = tc.prepare(t, srv, seqs)
			}
			var peak atomic.Int64
			budget := membudget.New(256<<10, func(used int64) {
				if used > peak.Load() {
					peak.Store(used)
				}
			})
			budget.SetFloor(16 << 10)
			out := make(chan Delivery)
			env := testEnv(inputtest.OpenFileStore(t), out, limit(10), func(e *Env) { e.Budget = budget })
			pub := polling.New(client, srv.StreamARN("orders"), polling.Options{Interval: 50 * time.Millisecond, IdleInterval: 50 * time.Millisecond})
			s := NewStream(env, StreamConfig{Name: "orders", ARN: srv.StreamARN("orders"), Client: client, Publisher: pub})
			listed, err := listShards(t.Context(), client, s.conf.ARN)
			if err != nil {
				t.Fatal(err)
			}
			g := &roomGrant{start: start, until: coord.Never}
			if tc.lapse > 0 {
				g.until = time.Now().Add(tc.lapse)
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			r := newShardReader(s, listed[0], g, cancel)
			done := make(chan shardEvent, 1)
			go func() { done <- r.run(ctx) }()

			var got []int
			var held []Delivery
			var ev shardEvent
			from := out
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(30 * time.Second)
			for running := true; running; {
				select {
				case d := <-from:
					for _, m := range d.Batch() {
						b, _ := m.AsBytes()
						var i int
						if _, err := fmt.Sscanf(string(b), "r-%04d-", &i); err != nil {
							t.Fatalf("message %.20q: %v", b, err)
						}
						got = append(got, i)
					}
					if tc.take == 0 || len(got) < tc.take {
						d.Ack(nil)
						continue
					}
					// Taken enough: no more is taken (a reader stopping
					// must not find the pipeline ready), this one is held.
					from = nil
					if tc.ackAll {
						d.Ack(nil)
					} else {
						held = append(held, d)
					}
					if tc.cancel {
						cancel(nil)
					}
				case ev = <-done:
					running = false
				case <-tick.C:
					if tc.take == 0 && tc.cancel && shardStopped(s, shard0) {
						cancel(nil)
					}
				case <-deadline:
					t.Fatalf("the reader neither delivered what it should nor stopped in 30 s (got %v)", got)
				}
			}
			for _, d := range held {
				d.Ack(nil)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("delivered records %v, want %v", got, tc.want)
			}
			if ev.ended != tc.ended {
				t.Errorf("the reader reported the shard's end: %v, want %v", ev.ended, tc.ended)
			}
			if used := budget.Used(); used != 0 {
				t.Errorf("%d bytes of room were not given back (peak %d)", used, peak.Load())
			}
			if len(tc.want) > 0 && peak.Load() == 0 {
				t.Error("the reader never took room: the check above proves nothing")
			}
		})
	}
}

// shardStopped reports whether the stream's health has the shard stopped on
// its position (kinesis_shard_stopped).
func shardStopped(s *Stream, shardID string) bool {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.stopped[shardID]
}

func span(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// refuseSequenceStarts makes the fake refuse every read of shardID starting
// at or after a sequence number, as Kinesis refuses a position for another
// reason than the retention period: its record is still there.
func refuseSequenceStarts(srv *kinesisfake.Server, shardID string) {
	srv.Control("GetShardIterator", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ ShardId, ShardIteratorType, StartingSequenceNumber string }
		if json.Unmarshal(r.Body, &in) != nil || in.ShardId != shardID || !strings.HasSuffix(in.ShardIteratorType, "_SEQUENCE_NUMBER") {
			return false, 0, nil
		}
		status, body := kinesisfake.ErrorBody("InvalidArgumentException", "StartingSequenceNumber "+in.StartingSequenceNumber+" is refused (injected).")
		return true, status, body
	})
}

// roomGrant is the grant of one shard reader: it starts at start and lapses
// at until.
type roomGrant struct {
	start checkpoint.Checkpoint
	until time.Time
}

func (g *roomGrant) Start() checkpoint.Checkpoint                         { return g.start }
func (g *roomGrant) Acked(checkpoint.Position)                            {}
func (g *roomGrant) Ended(context.Context, *checkpoint.Position) error    { return nil }
func (g *roomGrant) Read(int, time.Time)                                  {}
func (g *roomGrant) Until() time.Time                                     { return g.until }
func (g *roomGrant) Stopped(context.Context, func(context.Context) error) {}
