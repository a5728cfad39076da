package input

import (
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/testkit"
)

// splitCorrupt separates the messages flagged as corrupt aggregates.
func splitCorrupt(msgs []testkit.Got) (good, corrupt []testkit.Got) {
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
	testkit.CreateStream(t, client, "orders", 2)
	prod := testkit.ProduceAggregated(t, client, "orders", "u", testkit.AggregateMix{Aggregates: 2000, MinUsers: 1, MaxUsers: 50, Plain: 500, Seed: 1})
	out := &testkit.Collector{}
	p := testkit.StartPipeline(t, localInput(k, "orders", t.TempDir(), ""), out)
	out.WaitFor(t, len(prod.Users), 3*time.Minute)
	time.Sleep(500 * time.Millisecond)
	p.Stop(t)
	msgs := out.All()
	testkit.CheckDelivery(t, msgs, prod.Users, true)
	testkit.CheckOrder(t, msgs)
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
	testkit.CreateStream(t, client, "orders", 1)
	prod := testkit.ProduceAggregated(t, client, "orders", "u", testkit.AggregateMix{Aggregates: 200, MinUsers: 50, MaxUsers: 50, Seed: 2})
	dir := t.TempDir()
	conf := localInput(k, "orders", dir, "polling: { limit: 5 }\nbatching: { count: 7, period: 200ms }")
	arn := k.StreamARN("orders")

	var all []testkit.Got
	partial := 0
	for run := 0; run < 4 && len(all) < len(prod.Users); run++ {
		out := &testkit.Collector{}
		p := testkit.StartPipeline(t, conf, out)
		if run < 3 {
			out.WaitFor(t, 1500, time.Minute)
		} else {
			out.WaitFor(t, len(prod.Users)-len(all), time.Minute)
			time.Sleep(500 * time.Millisecond)
		}
		p.Stop(t)
		testkit.CheckOrder(t, out.All())
		all = append(all, out.All()...)
		if cp := testkit.ReadCheckpoints(t, dir, arn).Shards["shardId-000000000000"].Position; cp != nil && cp.Partial {
			partial++
		}
	}
	if partial == 0 {
		t.Fatal("no stop left the checkpoint inside an aggregate: the test proved nothing")
	}
	testkit.CheckDelivery(t, all, prod.Users, true)
	t.Logf("%d of the stops left the checkpoint inside an aggregate", partial)
}

// TestLocalCorruptAggregates: corrupt aggregates arrive whole, flagged, and
// the rest of the shard continues.
func TestLocalCorruptAggregates(t *testing.T) {
	k := emulator.KinesisLocal(t)
	client := k.Client()
	testkit.CreateStream(t, client, "orders", 1)
	prod := testkit.ProduceAggregated(t, client, "orders", "u", testkit.AggregateMix{Aggregates: 100, MinUsers: 1, MaxUsers: 10, Plain: 50, Corrupt: 5, Seed: 3})
	out := &testkit.Collector{}
	p := testkit.StartPipeline(t, localInput(k, "orders", t.TempDir(), ""), out)
	out.WaitFor(t, len(prod.Users)+len(prod.Corrupt), time.Minute)
	time.Sleep(500 * time.Millisecond)
	p.Stop(t)
	good, corrupt := splitCorrupt(out.All())
	testkit.CheckDelivery(t, good, prod.Users, true)
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
	prod := testkit.ProduceAggregated(t, srv.NewClient(), "orders", "u", testkit.AggregateMix{Aggregates: 2000, MinUsers: 1, MaxUsers: 50, Plain: 500, Seed: 4})
	out := &testkit.Collector{}
	p := testkit.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out)
	out.WaitFor(t, len(prod.Users), 2*time.Minute)
	time.Sleep(300 * time.Millisecond)
	p.Stop(t)
	msgs := out.All()
	testkit.CheckDelivery(t, msgs, prod.Users, true)
	testkit.CheckOrder(t, msgs)
}

// TestEFORestartInsideAggregate is TestLocalRestartInsideAggregate by
// fan-out: resuming inside an aggregate uses AT_SEQUENCE_NUMBER there too.
func TestEFORestartInsideAggregate(t *testing.T) {
	srv := newFake(t, kinesisfake.Stream("orders", 1), kinesisfake.MaxEventRecords(3))
	prod := testkit.ProduceAggregated(t, srv.NewClient(), "orders", "u", testkit.AggregateMix{Aggregates: 200, MinUsers: 50, MaxUsers: 50, Seed: 5})
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "efo: { consumer_name: app }\nbatching: { count: 7, period: 200ms }\ncheckpoint: { dir: '"+dir+"', commit_period: 100ms, limit: 20 }")
	conf = strings.Replace(conf, "checkpoint: { dir: '"+dir+"', commit_period: 100ms }\n", "", 1)
	var all []testkit.Got
	partial := 0
	for run := 0; run < 4 && len(all) < len(prod.Users); run++ {
		out := &testkit.Collector{}
		p := testkit.StartPipeline(t, conf, out)
		if run < 3 {
			out.WaitFor(t, 1500, time.Minute)
		} else {
			out.WaitFor(t, len(prod.Users)-len(all), time.Minute)
			time.Sleep(300 * time.Millisecond)
		}
		p.Stop(t)
		testkit.CheckOrder(t, out.All())
		all = append(all, out.All()...)
		if cp := testkit.ReadCheckpoints(t, dir, srv.StreamARN("orders")).Shards["shardId-000000000000"].Position; cp != nil && cp.Partial {
			partial++
		}
	}
	if partial == 0 {
		t.Fatal("no stop left the checkpoint inside an aggregate: the test proved nothing")
	}
	testkit.CheckDelivery(t, all, prod.Users, true)
}
