package input

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// On-demand DynamoDB prices in us-east-1 (since November 2024), per million
// request units.
const (
	pricePerMillionWRU = 0.625
	pricePerMillionRRU = 0.125
	secondsPerMonth    = 30 * 24 * 3600
)

// BenchmarkLeaseTableScale runs inputs sharing one stream through one
// lease table in this process, with the fake Kinesis and dynalite behind a
// proxy that counts the DynamoDB calls by operation: 64 shards over 4
// instances, 256 over 8 and 1,024 over 16 at lease_period 10s, and 32
// shards over 4 at lease_period 2s.
// Each reports the time from the start until the shards are balanced
// (every shard owned, the instances within one of each other), in seconds
// and in lease periods, the DynamoDB calls per second in steady state
// (idle shards: heartbeats and scans; a lease is written only when its
// checkpoint moves), and what that costs per shard and per instance per
// month at on-demand prices. It runs once whatever -benchtime says: make
// bench-leases.
func BenchmarkLeaseTableScale(b *testing.B) {
	for _, sc := range []struct {
		shards, instances int
		period            time.Duration
	}{
		{64, 4, 10 * time.Second},
		{256, 8, 10 * time.Second},
		{1024, 16, 10 * time.Second},
		{32, 4, 2 * time.Second},
	} {
		b.Run(fmt.Sprintf("%dx%d/lease_period=%v", sc.shards, sc.instances, sc.period), func(b *testing.B) {
			benchLeaseScale(b, sc.shards, sc.instances, sc.period)
		})
	}
}

func benchLeaseScale(b *testing.B, shards, instances int, period time.Duration) {
	const window = 30 * time.Second
	srv, err := kinesisfake.New(kinesisfake.TLS(), kinesisfake.Stream("orders", shards), kinesisfake.Quotas(false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	d := emulator.Dynalite(b)
	proxy := emulator.NewDynamoDBProxy(b, d)
	via := &emulator.DynamoDB{Endpoint: proxy.Endpoint, Region: d.Region}
	yaml := func(i int) string {
		return fakeYAML(srv, "orders", fmt.Sprintf(`
  dynamodb: { table: scale, create: true, endpoint: %s, lease_period: %v, instance_id: i%02d }`, via.Endpoint, period, i),
			"reader: polling\npolling: { interval: 5s }")
	}
	b.ResetTimer()
	start := time.Now()
	for i := range instances {
		inputtest.StartPipeline(b, yaml(i), &inputtest.Collector{})
	}
	var held map[string]int
	lastLog := start
	for {
		held = spreadOf(b, d, "scale")
		if balancedSpread(held, shards, instances) {
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
	b.Logf("%d shards over %d instances balanced in %v (%.1f lease periods): %v", shards, instances, balanced.Round(100*time.Millisecond), balanced.Seconds()/period.Seconds(), summarize(held))

	time.Sleep(period) // settle
	c0, u0 := proxy.Calls()
	time.Sleep(window)
	c1, u1 := proxy.Calls()
	b.StopTimer()
	secs := window.Seconds()
	var ops []string
	total := 0.0
	for op, n := range c1 {
		rate := float64(n-c0[op]) / secs
		total += rate
		ops = append(ops, fmt.Sprintf("%s %.1f/s", op, rate))
	}
	slices.Sort(ops)
	wru := (u1["UpdateItem"] - u0["UpdateItem"] + u1["PutItem"] - u0["PutItem"] + u1["DeleteItem"] - u0["DeleteItem"]) / secs
	rru := (u1["Scan"] - u0["Scan"] + u1["GetItem"] - u0["GetItem"]) / secs
	month := (wru*pricePerMillionWRU + rru*pricePerMillionRRU) * secondsPerMonth / 1e6
	b.Logf("steady state, idle shards: %.1f DynamoDB calls/s (%s); %.1f write and %.1f read units/s; $%.2f a month: $%.4f per shard, $%.2f per instance", total, strings.Join(ops, ", "), wru, rru, month, month/float64(shards), month/float64(instances))
	b.ReportMetric(balanced.Seconds(), "s-to-balance")
	b.ReportMetric(balanced.Seconds()/period.Seconds(), "periods-to-balance")
	b.ReportMetric(total, "ddb-calls/s")
	b.ReportMetric(month/float64(shards), "$/shard/month")
	b.ReportMetric(month/float64(instances), "$/instance/month")
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
