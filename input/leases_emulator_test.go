package input

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// leaseYAML is the input's YAML for the fake with a lease table on d.
func leaseYAML(srv *kinesisfake.Server, d *emulator.DynamoDB, table, instance, extra string) string {
	return fakeYAML(srv, "orders", fmt.Sprintf(`
  commit_period: 100ms
  dynamodb: { table: %s, create: true, endpoint: %s, lease_period: 2s, instance_id: %s }`, table, d.Endpoint, instance), extra)
}

// owners scans the table, every page: the owner of every shard item, by
// leaseKey.
func owners(t testing.TB, d *emulator.DynamoDB, table string) map[string]string {
	t.Helper()
	items, ok := tableItems(t, d, table, "shard")
	if !ok {
		return nil // not created yet
	}
	got := map[string]string{}
	for _, it := range items {
		got[attrS(it, "leaseKey")] = attrS(it, "leaseOwner")
	}
	return got
}

// tableItems scans the table, every page, strongly consistent: its items of
// a kind (shard, stream, worker). ok is false while the table does not exist.
func tableItems(t testing.TB, d *emulator.DynamoDB, table, kind string) (items []map[string]types.AttributeValue, ok bool) {
	t.Helper()
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := d.Client().Scan(t.Context(), in)
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			if attrS(it, "kind") == kind {
				items = append(items, it)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return items, true
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// attrS is a string attribute of an item, "" when absent.
func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// spread counts the shards each owner holds ("" for free ones).
func spread(o map[string]string) map[string]int {
	n := map[string]int{}
	for _, owner := range o {
		n[owner]++
	}
	return n
}

// TestLeasesShareAStream runs three inputs on one lease table in one
// process: the 16 shards spread 5-6 each, every record arrives exactly once
// over the three, and when one stops cleanly the others take its shards and
// read on exactly after its last checkpoint.
func TestLeasesShareAStream(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 16))
	d := emulator.Dynalite(t)
	const table = "leases"
	var all []inputtest.Got
	outs := make([]*inputtest.Collector, 3)
	pipes := make([]*inputtest.Pipeline, 3)
	for i := range pipes {
		outs[i] = &inputtest.Collector{}
		pipes[i] = inputtest.StartPipeline(t, leaseYAML(srv, d, table, fmt.Sprintf("i%d", i), "reader: polling\npolling: { interval: 200ms }"), outs[i])
	}
	want := fakeProduce(t, srv, "orders", "a", 2000, 32)

	// The spread counts from the moment all three are in the table: how
	// long three Benthos pipelines take to start on a loaded machine is not
	// the lease core's. Nine lease cycles (6 s) bound it.
	inputtest.WaitUntil(t, 20*time.Second, func() bool { return len(workerIDs(t, d, table)) == 3 })
	start := time.Now()
	last := map[string]string{}
	var trace []string
	if !inputtest.Eventually(6*time.Second, func() bool {
		for k, v := range rawItems(t, d, table) {
			if last[k] != v {
				trace = append(trace, fmt.Sprintf("+%v %s: %s", time.Since(start).Round(10*time.Millisecond), k[len(k)-2:], v))
				last[k] = v
			}
		}
		n := spread(owners(t, d, table))
		return n[""] == 0 && n["i0"] >= 5 && n["i1"] >= 5 && n["i2"] >= 5
	}) {
		t.Fatalf("16 shards not spread 5-6 each 6 s after all three were in the table: %v\n%s", spread(owners(t, d, table)), strings.Join(trace, "\n"))
	}
	t.Log(strings.Join(trace, "\n"))
	t.Logf("16 shards spread %v %v after all three were in the table", spread(owners(t, d, table)), time.Since(start).Round(time.Millisecond))
	inputtest.WaitUntil(t, 30*time.Second, func() bool {
		n := 0
		for _, o := range outs {
			n += o.Count()
		}
		return n >= len(want)
	})

	// One stops cleanly: the others take its shards and read on.
	pipes[0].Stop(t)
	more := fakeProduce(t, srv, "orders", "b", 1000, 32)
	for k, v := range more {
		want[k] = v
	}
	inputtest.WaitUntil(t, 10*time.Second, func() bool {
		n := spread(owners(t, d, table))
		return n["i0"] == 0 && n[""] == 0
	})
	inputtest.WaitUntil(t, 30*time.Second, func() bool {
		n := 0
		for _, o := range outs {
			n += o.Count()
		}
		return n >= len(want)
	})
	time.Sleep(300 * time.Millisecond)
	pipes[1].Stop(t)
	pipes[2].Stop(t)
	for _, o := range outs {
		all = append(all, o.All()...)
		inputtest.CheckOrder(t, o.All())
	}
	inputtest.CheckDelivery(t, all, want, true)
}

// TestLeasesReshardAcrossInstances splits and merges shards while three
// inputs share the stream: a child is read only once every parent is
// finished in the table, whichever instance read the parents, so every
// partition key's records leave the pipelines in the order produced (one
// collector records the order over all three), and none twice.
func TestLeasesReshardAcrossInstances(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4))
	d := emulator.Dynalite(t)
	out := &inputtest.Collector{}
	var pipes []*inputtest.Pipeline
	for i := range 3 {
		pipes = append(pipes, inputtest.StartPipeline(t, leaseYAML(srv, d, "reshard", fmt.Sprintf("i%d", i), "reader: polling"), out))
	}
	want := fakeProduce(t, srv, "orders", "a", 600, 16)
	inputtest.WaitUntil(t, 10*time.Second, func() bool { n := spread(owners(t, d, "reshard")); return n[""] == 0 && len(n) == 3 })

	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SplitShard("orders", *shards[0].ShardId, ""); err != nil {
		t.Fatal(err)
	}
	for k, v := range fakeProduce(t, srv, "orders", "b", 600, 16) {
		want[k] = v
	}
	if _, err := srv.MergeShards("orders", *shards[1].ShardId, *shards[2].ShardId); err != nil {
		t.Fatal(err)
	}
	for k, v := range fakeProduce(t, srv, "orders", "c", 600, 16) {
		want[k] = v
	}
	out.WaitFor(t, len(want), 60*time.Second)
	time.Sleep(300 * time.Millisecond)
	for _, p := range pipes {
		p.Stop(t)
	}
	all := out.All()
	inputtest.CheckDelivery(t, all, want, true)
	inputtest.CheckOrder(t, all)
	// Every child was read: its records are there, from its own shard.
	children := map[string]bool{}
	for _, m := range all {
		children[m.Shard] = true
	}
	if len(children) < 6 {
		t.Fatalf("records came from %d shards, want the 4 parents and at least 2 of the 3 children: %v", len(children), children)
	}
}

// TestLeasesSurviveThrottling: DynamoDB throttling every lease write and scan
// for less than a lease period is retried (by the SDK with backoff, then by
// the next renewal) and drops no lease: every shard keeps its owner, and
// every record arrives exactly once.
func TestLeasesSurviveThrottling(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 8))
	d := emulator.Dynalite(t)
	proxy := emulator.NewDynamoDBProxy(t, d)
	via := &emulator.DynamoDB{Endpoint: proxy.Endpoint, Region: d.Region}
	var outs []*inputtest.Collector
	var pipes []*inputtest.Pipeline
	for i := range 2 {
		out := &inputtest.Collector{}
		outs = append(outs, out)
		pipes = append(pipes, inputtest.StartPipeline(t, leaseYAML(srv, via, "throttled", fmt.Sprintf("i%d", i), "reader: polling"), out))
	}
	want := fakeProduce(t, srv, "orders", "a", 400, 16)
	inputtest.WaitUntil(t, 10*time.Second, func() bool { n := spread(owners(t, d, "throttled")); return n["i0"] == 4 && n["i1"] == 4 })
	before := owners(t, d, "throttled")

	calls, _ := proxy.Calls()
	proxy.Throttle(800*time.Millisecond, "UpdateItem", "Scan", "PutItem", "GetItem")
	for k, v := range fakeProduce(t, srv, "orders", "b", 400, 16) {
		want[k] = v
	}
	time.Sleep(time.Second) // the throttling window, and a renewal after it
	after, _ := proxy.Calls()
	if after["UpdateItem"] <= calls["UpdateItem"] {
		t.Fatal("no lease write was tried while throttled")
	}
	for k, v := range fakeProduce(t, srv, "orders", "c", 400, 16) {
		want[k] = v
	}
	inputtest.WaitUntil(t, 30*time.Second, func() bool { return outs[0].Count()+outs[1].Count() >= len(want) })
	if got := owners(t, d, "throttled"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("throttling shorter than a lease period moved leases:\nbefore %v\nafter  %v", before, got)
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range pipes {
		p.Stop(t)
	}
	inputtest.CheckDelivery(t, append(outs[0].All(), outs[1].All()...), want, true)
}

// TestLeasesOwnerDiedBeforeFirstCheckpoint: shards whose owner died before
// its first checkpoint (Redpanda Connect never reads them again) are taken
// once the lease expires and read from their stored start, exactly once.
func TestLeasesOwnerDiedBeforeFirstCheckpoint(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4))
	d := emulator.Dynalite(t)
	ctx := t.Context()
	tb, err := lease.Open(ctx, d.Client(), "ghosts", true)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		it, _, err := tb.Create(ctx, lease.Shard{Stream: srv.StreamARN("orders"), ShardID: *sh.ShardId, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Take(ctx, it, "ghost", ""); err != nil {
			t.Fatal(err)
		}
	}
	want := fakeProduce(t, srv, "orders", "a", 400, 8)
	m := &inputtest.Metrics{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineWith(t, leaseYAML(srv, d, "ghosts", "heir", "reader: polling"), out.Consume, inputtest.Options{Metrics: m})
	start := time.Now()
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return spread(owners(t, d, "ghosts"))["heir"] == 4 })
	t.Logf("the dead owner's 4 leases taken %v after the start (lease_period 2s)", time.Since(start).Round(10*time.Millisecond))
	p.StopWhen(t, out, len(want), 20*time.Second)
	inputtest.CheckDelivery(t, out.All(), want, true)
	if n := m.Counter("kinesis_leases_taken", "stream", "orders"); n != 4 {
		t.Errorf("kinesis_leases_taken %d, want 4", n)
	}
}

// TestLeasesKinesisLocal: two inputs share two streams of kinesis-local
// through one lease table (one item per stream and shard), each record
// exactly once over both, every shard held by one of them, and the metrics
// count what each holds.
func TestLeasesKinesisLocal(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	d := emulator.Dynalite(t)
	client := k.Client()
	want := inputtest.Produced{}
	for _, name := range []string{"alpha", "beta"} {
		inputtest.CreateStream(t, client, name, 4)
		for data, pk := range inputtest.Produce(t, client, name, name, 600, 31) {
			want[data] = pk
		}
	}
	out := &inputtest.Collector{}
	var metrics []*inputtest.Metrics
	var pipes []*inputtest.Pipeline
	for i := range 2 {
		m := &inputtest.Metrics{}
		metrics = append(metrics, m)
		yaml := fmt.Sprintf(`
streams: [ alpha, beta ]
endpoint: %s
region: %s
credentials: { id: %s, secret: %s }
reader: polling
start_from: trim_horizon
checkpoint:
  commit_period: 100ms
  dynamodb: { table: local, create: true, endpoint: %s, lease_period: 2s, instance_id: i%d }
`, k.Endpoint, k.Region, emulator.AccessKeyID, emulator.SecretAccessKey, d.Endpoint, i)
		pipes = append(pipes, inputtest.StartPipelineWith(t, yaml, out.Consume, inputtest.Options{Metrics: m}))
	}
	out.WaitFor(t, len(want), time.Minute)
	inputtest.WaitUntil(t, 10*time.Second, func() bool {
		n := spread(owners(t, d, "local"))
		return n[""] == 0 && n["i0"] == 4 && n["i1"] == 4
	})
	// The gauges follow the table within a lease cycle (a lease handed
	// over is taken up at the taker's next cycle).
	for _, name := range []string{"alpha", "beta"} {
		held := func() int64 {
			return metrics[0].Counter("kinesis_owned_shards", "stream", name) + metrics[1].Counter("kinesis_owned_shards", "stream", name)
		}
		if !inputtest.Eventually(5*time.Second, func() bool { return held() == 4 }) {
			t.Errorf("stream %s: kinesis_owned_shards over both instances %d, want 4", name, held())
		}
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range pipes {
		p.Stop(t)
	}
	inputtest.CheckDelivery(t, out.All(), want, true)
	inputtest.CheckOrder(t, out.All())
}

// TestLeaseGroupsEachReadEveryRecord: pipelines of different groups keep
// their leases in one table and read one stream; each group shares the
// shards among its own instances, and reads every record exactly once,
// whatever the others do.
func TestLeaseGroupsEachReadEveryRecord(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 8))
	d := emulator.Dynalite(t)
	const table = "shared"
	groups := map[string][]string{"": {"plain"}, "archiver": {"a0", "a1"}, "indexer": {"x0", "x1"}}
	outs := map[string][]*inputtest.Collector{}
	var pipes []*inputtest.Pipeline
	for group, instances := range groups {
		for _, id := range instances {
			out := &inputtest.Collector{}
			outs[group] = append(outs[group], out)
			extra := "reader: polling\npolling: { interval: 200ms }"
			yaml := leaseYAML(srv, d, table, id, extra)
			if group != "" {
				yaml = strings.Replace(yaml, "instance_id: "+id, "instance_id: "+id+", group: "+group, 1)
			}
			pipes = append(pipes, inputtest.StartPipeline(t, yaml, out))
		}
	}
	want := fakeProduce(t, srv, "orders", "g", 1200, 40)
	count := func(group string) int {
		n := 0
		for _, o := range outs[group] {
			n += o.Count()
		}
		return n
	}
	inputtest.WaitUntil(t, time.Minute, func() bool {
		return count("") >= len(want) && count("archiver") >= len(want) && count("indexer") >= len(want)
	})
	// Each group holds the 8 shards once, shared among its own instances.
	inputtest.WaitUntil(t, 30*time.Second, func() bool {
		n := spread(owners(t, d, table))
		return n["plain"] == 8 && n["a0"]+n["a1"] == 8 && n["x0"]+n["x1"] == 8 && n["a0"] > 0 && n["a1"] > 0 && n["x0"] > 0 && n["x1"] > 0
	})
	// Anything extra (a record read twice) would arrive within a few polls.
	total := func() int { return count("") + count("archiver") + count("indexer") }
	inputtest.WaitUntil(t, 10*time.Second, steady(total, time.Second))
	for _, p := range pipes {
		p.Stop(t)
	}
	for group, cs := range outs {
		var all []inputtest.Got
		for _, o := range cs {
			all = append(all, o.All()...)
			inputtest.CheckOrder(t, o.All())
		}
		t.Logf("group %q: %d records", group, len(all))
		inputtest.CheckDelivery(t, all, want, true)
	}
}
