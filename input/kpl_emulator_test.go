package input

import (
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// splitCorrupt separates the messages flagged as corrupt aggregates.
func splitCorrupt(msgs []inputtest.Got) (good, corrupt []inputtest.Got) {
	for _, m := range msgs {
		if m.Err != "" {
			corrupt = append(corrupt, m)
		} else {
			good = append(good, m)
		}
	}
	return good, corrupt
}

// TestLocalAggregatedRecordsExactlyOnce reads 400 aggregates of 1-50 user
// records mixed with 100 plain records: every user record once, each shard and
// partition key in order.
func TestLocalAggregatedRecordsExactlyOnce(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 400, MinUsers: 1, MaxUsers: 50, Plain: 100, Seed: 1})
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, localInput(k, "orders", t.TempDir(), ""), out)
	p.StopWhen(t, out, len(prod.Users), 3*time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, prod.Users, true)
	inputtest.CheckOrder(t, msgs)
	if n := inputtest.CheckPlacement(t, msgs, prod.Placed); n != 0 {
		t.Fatalf("%d KPL user records flagged out of their shard's range", n)
	}
	subs := 0
	for _, m := range msgs {
		if m.Sub != "" {
			subs++
		}
	}
	if subs != len(prod.Users)-100 {
		t.Fatalf("%d messages carry a sub-sequence number, want %d (every user record of an aggregate)", subs, len(prod.Users)-100)
	}
}

// TestLocalRestartInsideAggregate stops the pipeline while the checkpoint
// sits inside an aggregate (batches of 7 cut aggregates of 50): the restart
// resumes inside it, losing and repeating nothing.
func TestLocalRestartInsideAggregate(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 1)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 80, MinUsers: 50, MaxUsers: 50, Seed: 2})
	dir := t.TempDir()
	conf := localInput(k, "orders", dir, "polling: { limit: 5 }\nbatching: { count: 7, period: 200ms }")
	arn := k.StreamARN("orders")

	restartInsideAggregates(t, conf, dir, arn, prod.Users)
}

// TestLocalCorruptAggregates: corrupt aggregates arrive whole, flagged, and
// the rest of the shard continues.
func TestLocalCorruptAggregates(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 1)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 100, MinUsers: 1, MaxUsers: 10, Plain: 50, Corrupt: 5, Seed: 3})
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, localInput(k, "orders", t.TempDir(), ""), out)
	p.StopWhen(t, out, len(prod.Users)+len(prod.Corrupt), time.Minute)
	good, corrupt := splitCorrupt(out.All())
	inputtest.CheckDelivery(t, good, prod.Users, true)
	if n := inputtest.CheckPlacement(t, out.All(), prod.Placed); n != 0 {
		t.Fatalf("%d messages flagged out of their shard's range; neither KPL user records nor corrupt aggregates are", n)
	}
	if len(corrupt) != len(prod.Corrupt) {
		t.Fatalf("%d corrupt messages, want %d", len(corrupt), len(prod.Corrupt))
	}
	for _, m := range corrupt {
		if !prod.Corrupt[m.Data] {
			t.Fatalf("a flagged message is not a corrupt aggregate as written: %q", m.Data)
		}
		if !strings.Contains(m.DeaggErr, "md5") || !strings.Contains(m.Err, "md5") {
			t.Fatalf("corrupt aggregate flagged with %q / metadata %q: want the reason (md5 mismatch)", m.Err, m.DeaggErr)
		}
	}
}

// TestEFOAggregatedRecordsExactlyOnce reads aggregates mixed with plain
// records by fan-out from the fake.
func TestEFOAggregatedRecordsExactlyOnce(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
	prod := inputtest.ProduceAggregated(t, srv.NewClient(), "orders", "u", inputtest.AggregateMix{Aggregates: 2000, MinUsers: 1, MaxUsers: 50, Plain: 500, Seed: 4})
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out)
	p.StopWhen(t, out, len(prod.Users), 2*time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, prod.Users, true)
	inputtest.CheckOrder(t, msgs)
	if n := inputtest.CheckPlacement(t, msgs, prod.Placed); n != 0 {
		t.Fatalf("%d KPL user records flagged out of their shard's range", n)
	}
}

// TestEFORestartInsideAggregate is TestLocalRestartInsideAggregate by
// fan-out: resuming inside an aggregate uses AT_SEQUENCE_NUMBER there too.
func TestEFORestartInsideAggregate(t *testing.T) {
	t.Parallel()
	// A short hand-over window: a restart's subscription is refused while
	// AWS still holds the stopped run's (up to 5 s); the test is about where
	// the restart resumes, not that wait.
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1), kinesisfake.MaxEventRecords(3),
		kinesisfake.SubscribeTakeoverWindow(time.Second))
	prod := inputtest.ProduceAggregated(t, srv.NewClient(), "orders", "u", inputtest.AggregateMix{Aggregates: 80, MinUsers: 50, MaxUsers: 50, Seed: 5})
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "efo: { consumer_name: app }\nbatching: { count: 7, period: 200ms }\ncheckpoint: { dir: '"+dir+"', commit_period: 100ms, limit: 20 }")
	conf = strings.Replace(conf, "checkpoint: { dir: '"+dir+"', commit_period: 100ms }\n", "", 1)
	restartInsideAggregates(t, conf, dir, srv.StreamARN("orders"), prod.Users)
}

// restartInsideAggregates runs the pipeline in up to four runs until every
// user record has arrived. Each of the first three runs accepts about a fifth
// of the messages and stops accepting right after a batch that ends inside an
// aggregate (every aggregate holds 50 user records, sub-sequences 0-49): later
// batches are rejected until the run stops, so the checkpoint must sit
// exactly at that message, inside its aggregate. It checks that position
// after each stop, order within each run, and exactly once over all runs.
func restartInsideAggregates(t *testing.T, conf, dir, streamARN string, want inputtest.Produced) {
	t.Helper()
	var all []inputtest.Got
	perRun := len(want) / 5
	for run := 0; run < 4 && len(all) < len(want); run++ {
		out := &inputtest.Collector{}
		var held *inputtest.Got // the last accepted message once the run holds
		if run < 3 {
			out.Reject = func(batch []inputtest.Got) bool {
				if held != nil {
					return true
				}
				if msgs := out.Msgs(); len(msgs) >= perRun && msgs[len(msgs)-1].Sub != "49" {
					last := msgs[len(msgs)-1]
					held = &last
					return true
				}
				return false
			}
		}
		p := inputtest.StartPipeline(t, conf, out)
		if run < 3 {
			waitHeld(t, out, &held, time.Minute)
			p.Stop(t)
			cp := inputtest.ReadCheckpoints(t, dir, streamARN).Shards["shardId-000000000000"].Position
			if hp := held.Position(); cp == nil || !cp.Partial || cp.Sequence != hp.Sequence || cp.SubSequence != hp.SubSequence {
				t.Fatalf("run %d held after %s (sub %s): the checkpoint is %+v, want that position inside its aggregate", run, held.Seq, held.Sub, cp)
			}
		} else {
			p.StopWhen(t, out, len(want)-len(all), time.Minute)
		}
		inputtest.CheckOrder(t, out.All())
		all = append(all, out.All()...)
	}
	inputtest.CheckDelivery(t, all, want, true)
}

// waitHeld waits until the collector's Reject has set *held.
func waitHeld(t *testing.T, out *inputtest.Collector, held **inputtest.Got, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out.Lock()
		h, n := *held, len(out.Msgs())
		out.Unlock()
		if h != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never held: %d messages arrived within %v", n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
