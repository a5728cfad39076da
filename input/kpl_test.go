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

// TestLocalAggregatedRecordsExactlyOnce reads 2,000 aggregates of 1-50 user
// records mixed with plain records: every user record once, each shard and
// partition key in order.
func TestLocalAggregatedRecordsExactlyOnce(t *testing.T) {
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 2000, MinUsers: 1, MaxUsers: 50, Plain: 500, Seed: 1})
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, localInput(k, "orders", t.TempDir(), ""), out)
	p.StopWhen(t, out, len(prod.Users), 3*time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, prod.Users, true)
	inputtest.CheckOrder(t, msgs)
	subs := 0
	for _, m := range msgs {
		if m.Sub != "" {
			subs++
		}
	}
	if subs != len(prod.Users)-500 {
		t.Fatalf("%d messages carry a sub-sequence number, want %d (every user record of an aggregate)", subs, len(prod.Users)-500)
	}
}

// TestLocalRestartInsideAggregate stops the pipeline while the checkpoint
// sits inside an aggregate (batches of 7 cut aggregates of 50): the restart
// resumes inside it, losing and repeating nothing.
func TestLocalRestartInsideAggregate(t *testing.T) {
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 1)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 200, MinUsers: 50, MaxUsers: 50, Seed: 2})
	dir := t.TempDir()
	conf := localInput(k, "orders", dir, "polling: { limit: 5 }\nbatching: { count: 7, period: 200ms }")
	arn := k.StreamARN("orders")

	restartInsideAggregates(t, conf, dir, arn, prod.Users)
}

// TestLocalCorruptAggregates: corrupt aggregates arrive whole, flagged, and
// the rest of the shard continues.
func TestLocalCorruptAggregates(t *testing.T) {
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 1)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 100, MinUsers: 1, MaxUsers: 10, Plain: 50, Corrupt: 5, Seed: 3})
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, localInput(k, "orders", t.TempDir(), ""), out)
	p.StopWhen(t, out, len(prod.Users)+len(prod.Corrupt), time.Minute)
	good, corrupt := splitCorrupt(out.All())
	inputtest.CheckDelivery(t, good, prod.Users, true)
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
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	prod := inputtest.ProduceAggregated(t, srv.NewClient(), "orders", "u", inputtest.AggregateMix{Aggregates: 2000, MinUsers: 1, MaxUsers: 50, Plain: 500, Seed: 4})
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out)
	p.StopWhen(t, out, len(prod.Users), 2*time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, prod.Users, true)
	inputtest.CheckOrder(t, msgs)
}

// TestEFORestartInsideAggregate is TestLocalRestartInsideAggregate by
// fan-out: resuming inside an aggregate uses AT_SEQUENCE_NUMBER there too.
func TestEFORestartInsideAggregate(t *testing.T) {
	srv := newFake(t, kinesisfake.Stream("orders", 1), kinesisfake.MaxEventRecords(3))
	prod := inputtest.ProduceAggregated(t, srv.NewClient(), "orders", "u", inputtest.AggregateMix{Aggregates: 200, MinUsers: 50, MaxUsers: 50, Seed: 5})
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "efo: { consumer_name: app }\nbatching: { count: 7, period: 200ms }\ncheckpoint: { dir: '"+dir+"', commit_period: 100ms, limit: 20 }")
	conf = strings.Replace(conf, "checkpoint: { dir: '"+dir+"', commit_period: 100ms }\n", "", 1)
	restartInsideAggregates(t, conf, dir, srv.StreamARN("orders"), prod.Users)
}

// restartInsideAggregates runs the pipeline in up to four runs, stopping
// each of the first three after 1,500 messages, until every user record has
// arrived. It checks order within each run, exactly once over all runs, and
// that at least one stop left the checkpoint inside an aggregate (else the
// test proved nothing).
func restartInsideAggregates(t *testing.T, conf, dir, streamARN string, want inputtest.Produced) {
	t.Helper()
	var all []inputtest.Got
	partial := 0
	for run := 0; run < 4 && len(all) < len(want); run++ {
		out := &inputtest.Collector{}
		p := inputtest.StartPipeline(t, conf, out)
		if run < 3 {
			out.WaitFor(t, 1500, time.Minute)
			p.Stop(t)
		} else {
			p.StopWhen(t, out, len(want)-len(all), time.Minute)
		}
		inputtest.CheckOrder(t, out.All())
		all = append(all, out.All()...)
		if cp := inputtest.ReadCheckpoints(t, dir, streamARN).Shards["shardId-000000000000"].Position; cp != nil && cp.Partial {
			partial++
		}
	}
	if partial == 0 {
		t.Fatal("no stop left the checkpoint inside an aggregate: the test proved nothing")
	}
	inputtest.CheckDelivery(t, all, want, true)
	t.Logf("%d of the stops left the checkpoint inside an aggregate", partial)
}
