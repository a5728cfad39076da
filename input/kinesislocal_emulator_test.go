package input

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// localInput is the input's YAML for a kinesis-local emulator.
func localInput(k *emulator.Kinesis, streams, dir, extra string) string {
	return fmt.Sprintf(`
streams: [ %s ]
endpoint: %s
region: %s
credentials: { id: %s, secret: %s }
reader: polling
start_from: trim_horizon
checkpoint: { dir: '%s', commit_period: 100ms }
%s`, streams, k.Endpoint, k.Region, emulator.AccessKeyID, emulator.SecretAccessKey, dir, extra)
}

// TestLocalManyStreamsExactlyOnce reads 3 streams of 4 shards, about 100
// records per shard, through a whole pipeline from kinesis-local. (Volume is
// the in-process fake's to test: kinesis-local's CPU is the suite's.)
func TestLocalManyStreamsExactlyOnce(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	want := inputtest.Produced{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		inputtest.CreateStream(t, client, name, 4)
		for d, pk := range inputtest.Produce(t, client, name, name, 400, 97) {
			want[d] = pk
		}
	}
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, localInput(k, "alpha, beta, gamma", t.TempDir(), ""), out)
	out.WaitFor(t, len(want), 2*time.Minute)
	time.Sleep(500 * time.Millisecond) // anything extra would show now
	p.Stop(t)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	shards := map[string]bool{}
	for _, m := range msgs {
		shards[m.Stream+"/"+m.Shard] = true
	}
	if len(shards) != 12 {
		t.Fatalf("records came from %d shards, want 12", len(shards))
	}
}

// TestLocalCleanRestart stops the pipeline in the middle of a stream while
// records are still being written, then starts it again: nothing is lost and
// nothing repeated.
func TestLocalCleanRestart(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 4)
	want := inputtest.Produce(t, client, "orders", "first", 1200, 31)
	dir := t.TempDir()
	conf := strings.Replace(localInput(k, "orders", dir, "polling: { limit: 100 }"),
		"commit_period: 100ms }", "commit_period: 100ms, limit: 200 }", 1)

	// The first run accepts about 400 records and rejects what comes after
	// until it stops, so the stop is mid-stream on any machine.
	first := &inputtest.Collector{}
	first.AcceptOnly(400)
	p := inputtest.StartPipeline(t, conf, first)
	first.WaitFor(t, 400, time.Minute)
	for d, pk := range inputtest.Produce(t, client, "orders", "second", 400, 31) {
		want[d] = pk
	}
	p.Stop(t)
	n := first.Count()
	if n >= len(want) {
		t.Fatalf("the first run read everything (%d): the stop was not mid-stream", n)
	}

	second := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, second)
	p.StopWhen(t, second, len(want)-n, time.Minute)

	inputtest.CheckOrder(t, first.All())
	inputtest.CheckOrder(t, second.All())
	inputtest.CheckDelivery(t, append(first.All(), second.All()...), want, true)
	t.Logf("first run %d records, second run %d", n, second.Count())
}

// rejecter nacks every batch holding one of the target records while it is
// on, and remembers where the targets were.
type rejecter struct {
	targets map[string]bool
	on      func() bool
	seen    map[string]inputtest.Got // target data -> the message
	nacks   int
	lastLen int // the size of the last rejected batch
}

func (r *rejecter) reject(batch []inputtest.Got) bool {
	hit := false
	for _, m := range batch {
		if r.targets[m.Data] {
			r.seen[m.Data] = m
			hit = true
		}
	}
	if hit && r.on() {
		r.nacks++
		r.lastLen = len(batch)
		return true
	}
	return false
}

// TestLocalNackedRecordsComeAgain: with auto_replay_nacks (the default) a
// rejected batch is delivered again, and while it is rejected the checkpoint
// of its shard stays before it.
func TestLocalNackedRecordsComeAgain(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	want := inputtest.Produce(t, client, "orders", "n", 800, 13)
	dir := t.TempDir()

	var mu sync.Mutex
	rejecting := true
	r := &rejecter{targets: map[string]bool{"n-0000200": true, "n-0000600": true}, seen: map[string]inputtest.Got{},
		on: func() bool { mu.Lock(); defer mu.Unlock(); return rejecting }}
	out := &inputtest.Collector{Reject: r.reject}
	p := inputtest.StartPipeline(t, localInput(k, "orders", dir, "polling: { limit: 50 }"), out)
	arn := k.StreamARN("orders")

	// While the targets are rejected, the checkpoint never reaches them:
	// watch it until both targets have been rejected for a while.
	deadline := time.Now().Add(30 * time.Second)
	var bothSince time.Time
	for bothSince.IsZero() || time.Since(bothSince) < 2*time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("targets seen %d, nacks %d: the test did not reject both", len(r.seen), r.nacks)
		}
		cps := inputtest.ReadCheckpointsUnlocked(t, dir, arn)
		out.Lock()
		for _, m := range r.seen {
			if !inputtest.AfterCheckpoint(m, cps) {
				out.Unlock()
				t.Fatalf("the checkpoint of shard %s passed the rejected record %s (seq %s)", m.Shard, m.Data, m.Seq)
			}
		}
		if len(r.seen) == 2 && bothSince.IsZero() {
			bothSince = time.Now()
		}
		out.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	rejecting = false
	mu.Unlock()

	p.StopWhen(t, out, len(want), time.Minute)
	inputtest.CheckDelivery(t, out.All(), want, true)
	cps := inputtest.ReadCheckpoints(t, dir, arn)
	for _, m := range r.seen {
		if inputtest.AfterCheckpoint(m, cps) {
			t.Fatalf("after the replay succeeded the checkpoint of shard %s is still before %s", m.Shard, m.Data)
		}
	}
}

// TestLocalNackWithoutReplayHoldsCheckpoint: with auto_replay_nacks false a
// rejected record is not delivered again in this run, but the checkpoint never
// passes it, so the next run reads it again.
func TestLocalNackWithoutReplayHoldsCheckpoint(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	want := inputtest.Produce(t, client, "orders", "n", 400, 13)
	dir := t.TempDir()
	conf := localInput(k, "orders", dir, "polling: { limit: 50 }\nauto_replay_nacks: false")

	r := &rejecter{targets: map[string]bool{"n-0000150": true}, seen: map[string]inputtest.Got{}, on: func() bool { return true }}
	first := &inputtest.Collector{Reject: r.reject}
	p := inputtest.StartPipeline(t, conf, first)
	// Everything but the rejected batch arrives.
	deadline := time.Now().Add(time.Minute)
	for {
		first.Lock()
		n, nacks, rejected := len(first.Msgs()), r.nacks, r.lastLen
		first.Unlock()
		if nacks > 0 && n+rejected >= len(want) {
			time.Sleep(time.Second)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records, %d nacks", n, nacks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Stop(t)
	if r.nacks != 1 {
		t.Fatalf("the rejected batch was delivered %d times in one run, want once (no replay)", r.nacks)
	}
	target := r.seen["n-0000150"]
	cps := inputtest.ReadCheckpoints(t, dir, k.StreamARN("orders"))
	if !inputtest.AfterCheckpoint(target, cps) {
		t.Fatalf("the checkpoint of shard %s (%+v) passed the rejected record (seq %s)", target.Shard, cps.Shards[target.Shard].Position, target.Seq)
	}

	second := &inputtest.Collector{}
	p = inputtest.StartPipeline(t, conf, second)
	deadline = time.Now().Add(time.Minute)
	for !containsData(second.All(), "n-0000150") {
		if time.Now().After(deadline) {
			t.Fatal("the rejected record did not come again after a restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	p.Stop(t)
	inputtest.CheckDelivery(t, append(first.All(), second.All()...), want, false)
}

// TestLocalEFOThroughProxy reads 2 shards of about 300 records each by fan-out
// from kinesis-local. kinesis-local does not send the initial-response event
// aws-sdk-go-v2 needs; a test-only proxy (internal/emulator.EFOProxy) adds it.
func TestLocalEFOThroughProxy(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	want := inputtest.Produce(t, client, "orders", "x", 600, 41)
	proxy := emulator.EFOProxy(t, k.Endpoint)
	conf := strings.Replace(localInput(k, "orders", t.TempDir(), "efo: { consumer_name: app }"), "reader: polling\n", "reader: efo\n", 1)
	conf = strings.Replace(conf, "endpoint: "+k.Endpoint, "endpoint: "+proxy, 1)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, conf, out)
	p.StopWhen(t, out, len(want), 2*time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	perShard := map[string]int{}
	for _, m := range msgs {
		perShard[m.Shard]++
	}
	if len(perShard) != 2 {
		t.Fatalf("records from %d shards, want 2: %v", len(perShard), perShard)
	}
}
