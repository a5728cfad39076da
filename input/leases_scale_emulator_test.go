package input

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// scaleFleet is a fleet of BenchmarkLeaseTableScale and its busy twin.
type scaleFleet struct {
	shards, instances int
	period            time.Duration
}

func (f scaleFleet) String() string {
	return fmt.Sprintf("%dx%d/lease_period=%v", f.shards, f.instances, f.period)
}

// BenchmarkLeaseTableScale runs inputs sharing one stream through one
// lease table in this process, with the fake Kinesis and dynalite behind a
// proxy that counts the DynamoDB calls by operation and by the class of
// item they touch (leaseKeyClass): 64 shards over 4 instances, 256 over 8
// and 1,024 over 16 at lease_period 10s, and 32 shards over 4 at
// lease_period 2s.
// Each reports the time from the start until the shards are balanced
// (every shard owned, the instances within one of each other), in seconds
// and in lease periods, the DynamoDB calls and units per second in steady
// state by operation and class (idle shards: heartbeats and scans; a lease
// is written only when its checkpoint moves), and what that costs per
// shard and per instance per month at on-demand prices. It runs once
// whatever -benchtime says: make bench-leases.
func BenchmarkLeaseTableScale(b *testing.B) {
	for _, f := range []scaleFleet{
		{64, 4, 10 * time.Second},
		{256, 8, 10 * time.Second},
		{1024, 16, 10 * time.Second},
		{32, 4, 2 * time.Second},
	} {
		b.Run(f.String(), func(b *testing.B) { benchLeaseScale(b, f, false) })
	}
}

// BenchmarkLeaseTableScaleBusy is BenchmarkLeaseTableScale with every
// shard written all the time (a small record to each about every 200 ms,
// read by polling every second) and checkpoints committed every second:
// what a lease table costs when its checkpoints move, and what of it the
// checkpoints are (UpdateItem on shard items), beside the heartbeats. It
// also reports the Scans in the measured window, which a steady fleet
// needs none of. make bench-leases.
//
// 256 shards over 8 instances only: 1,024 busy shards are 1,024
// checkpoint writes a second, more than dynalite serves beside 16 inputs
// on a two-core machine (their commits took 3.4 s, a third of a lease
// period, and leases lapsed); their checkpoints cost what 256's do per
// shard, and the rest what the idle fleet costs.
func BenchmarkLeaseTableScaleBusy(b *testing.B) {
	for _, f := range []scaleFleet{
		{256, 8, 10 * time.Second},
	} {
		b.Run(f.String(), func(b *testing.B) { benchLeaseScale(b, f, true) })
	}
}

func benchLeaseScale(b *testing.B, f scaleFleet, busy bool) {
	const window = 30 * time.Second
	srv, err := kinesisfake.New(kinesisfake.TLS(), kinesisfake.Stream("orders", f.shards), kinesisfake.Quotas(false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	d := emulator.Dynalite(b)
	proxy := emulator.NewDynamoDBProxy(b, d)
	proxy.Classify(leaseKeyClass(srv.StreamARN("orders")))
	via := &emulator.DynamoDB{Endpoint: proxy.Endpoint, Region: d.Region}
	checkpoint, reader := "", "reader: polling\npolling: { interval: 5s }"
	if busy {
		checkpoint = "\n  commit_period: 1s"
		reader = "reader: polling\npolling: { interval: 1s }"
	}
	yaml := func(i int) string {
		return fakeYAML(srv, "orders", fmt.Sprintf(`%s
  dynamodb: { table: scale, create: true, endpoint: %s, lease_period: %v, instance_id: i%02d }`, checkpoint, via.Endpoint, f.period, i), reader)
	}
	var read atomic.Int64
	discard := func(_ context.Context, batch service.MessageBatch) error {
		read.Add(int64(len(batch)))
		return nil
	}
	if busy {
		produceToEveryShard(b, srv, "orders", 200*time.Millisecond)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range f.instances {
		inputtest.StartPipelineFunc(b, yaml(i), discard, nil)
	}
	var held map[string]int
	lastLog := start
	for {
		held = spreadOf(b, d, "scale")
		if balancedSpread(held, f.shards, f.instances) {
			break
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			b.Logf("after %v: %d free; %s", time.Since(start).Round(time.Second), held[""], summarize(held))
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("not balanced within 10 minutes: %v", held)
		}
		time.Sleep(100 * time.Millisecond)
	}
	balanced := time.Since(start)
	b.Logf("%d shards over %d instances balanced in %v (%.1f lease periods): %v", f.shards, f.instances, balanced.Round(100*time.Millisecond), balanced.Seconds()/f.period.Seconds(), summarize(held))

	// Settle: a lease period, and with busy shards until the meters of
	// the shards just taken are warm (a time constant of three lease
	// periods; their loads move by more than a quarter, and are published
	// again, for about five): a window that opened on their ramp counted
	// the reads of the publishes made just before it.
	settle := f.period
	if busy {
		settle = 6 * f.period
	}
	time.Sleep(settle)
	c0, u0 := proxy.CallsByClass()
	read0 := read.Load()
	time.Sleep(window)
	c1, u1 := proxy.CallsByClass()
	read1 := read.Load()
	b.StopTimer()
	r := emulator.RatesBetween(c0, u0, c1, u1, window)
	scans := c1["Scan/scan"] - c0["Scan/scan"]
	month := ddbcost.Monthly(r.WriteUnits, r.ReadUnits)
	state := "idle shards"
	if busy {
		state = fmt.Sprintf("busy shards, %.0f records/s read", float64(read1-read0)/window.Seconds())
	}
	b.Logf("steady state, %s: %.1f DynamoDB calls/s, %.1f write and %.1f read units/s; $%.2f a month: $%.4f per shard, $%.2f per instance", state, r.AllCalls, r.WriteUnits, r.ReadUnits, month, month/float64(f.shards), month/float64(f.instances))
	b.Logf("by operation/class, calls/s and units/s:\n%s", classTable(r))
	checkpoints := ddbcost.Monthly(r.Units["UpdateItem/shard"], 0)
	b.Logf("UpdateItem on shard items (checkpoints): %.1f calls/s, %.1f write units/s, $%.2f a month ($%.4f per shard); Scan calls in the %v window: %d",
		r.Calls["UpdateItem/shard"], r.Units["UpdateItem/shard"], checkpoints, checkpoints/float64(f.shards), window, scans)
	b.ReportMetric(balanced.Seconds(), "s-to-balance")
	b.ReportMetric(balanced.Seconds()/f.period.Seconds(), "periods-to-balance")
	b.ReportMetric(r.AllCalls, "ddb-calls/s")
	b.ReportMetric(month/float64(f.shards), "$/shard/month")
	b.ReportMetric(month/float64(f.instances), "$/instance/month")
	if busy {
		b.ReportMetric(checkpoints/float64(f.shards), "checkpoint-$/shard/month")
		b.ReportMetric(float64(scans), "scans/window")
	}
}

// classTable lays rates by "op/class" out a line each, most calls first.
func classTable(r emulator.Rates) string {
	keys := slices.SortedFunc(maps.Keys(r.Calls), func(a, b string) int {
		if c := cmp.Compare(r.Calls[b], r.Calls[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %-26s %8.2f calls/s %8.2f units/s\n", strings.TrimSuffix(k, "/"), r.Calls[k], r.Units[k])
	}
	return sb.String()
}

// leaseKeyClass classes the DynamoDB requests of the lease table of the
// stream arn by the leaseKey they touch: "stream" (the stream's ARN),
// "shard" (<arn>:<shardId>), "worker" (<arn>:worker:<id>), "roster"
// (<arn>:roster:<n>), "registration" (<arn>:registration:<consumer>);
// a Scan is "scan", a request of no item "" (DescribeTable), and a key of
// another layout "other". A BatchGetItem is classed by its first key.
func leaseKeyClass(arn string) func(op string, body []byte) string {
	return func(op string, body []byte) string {
		if op == "Scan" {
			return "scan"
		}
		var req struct {
			Key, Item    map[string]struct{ S string }
			RequestItems map[string]struct {
				Keys []map[string]struct{ S string }
			}
		}
		if json.Unmarshal(body, &req) != nil {
			return "other"
		}
		key, ok := req.Key["leaseKey"]
		if !ok {
			key, ok = req.Item["leaseKey"]
		}
		for _, r := range req.RequestItems {
			if len(r.Keys) > 0 && !ok {
				key, ok = r.Keys[0]["leaseKey"]
			}
		}
		if !ok {
			return ""
		}
		rest, ours := strings.CutPrefix(key.S, arn)
		switch {
		case !ours:
			return "other"
		case rest == "":
			return "stream"
		case strings.HasPrefix(rest, ":worker:"):
			return "worker"
		case strings.HasPrefix(rest, ":roster:"):
			return "roster"
		case strings.HasPrefix(rest, ":registration:"):
			return "registration"
		case strings.HasPrefix(rest, ":shardId-"):
			return "shard"
		}
		return "other"
	}
}

// produceToEveryShard writes a small record to every shard of stream every
// tick, by PutRecords through the fake's client (each record's explicit
// hash key the first of its shard), until b ends.
func produceToEveryShard(b *testing.B, srv *kinesisfake.Server, stream string, tick time.Duration) {
	shards, err := srv.Shards(stream)
	if err != nil {
		b.Fatal(err)
	}
	client := srv.NewClient()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			for batch := range slices.Chunk(shards, 500) {
				entries := make([]types.PutRecordsRequestEntry, len(batch))
				for i, sh := range batch {
					entries[i] = types.PutRecordsRequestEntry{
						Data:            fmt.Appendf(nil, "%s-%d", aws.ToString(sh.ShardId), n),
						PartitionKey:    aws.String("pk"),
						ExplicitHashKey: sh.HashKeyRange.StartingHashKey,
					}
				}
				if _, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil && ctx.Err() == nil {
					b.Errorf("producing: %v", err)
					return
				}
			}
		}
	})
}

// spreadOf is how many shards each instance holds ("" for free ones).
func spreadOf(t testing.TB, d *emulator.DynamoDB, table string) map[string]int {
	n := map[string]int{}
	for _, owner := range owners(t, d, table) {
		n[owner]++
	}
	return n
}

func balancedSpread(held map[string]int, shards, instances int) bool {
	if held[""] > 0 || len(held) != instances {
		return false
	}
	lo, hi, sum := shards, 0, 0
	for _, n := range held {
		lo, hi, sum = min(lo, n), max(hi, n), sum+n
	}
	return sum == shards && hi-lo <= 1
}

func summarize(held map[string]int) string {
	counts := map[int]int{}
	for owner, n := range held {
		if owner != "" {
			counts[n]++
		}
	}
	var parts []string
	for n, k := range counts {
		parts = append(parts, fmt.Sprintf("%d hold %d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
