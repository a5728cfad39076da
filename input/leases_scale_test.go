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

// BenchmarkLeaseTableScale runs 16 inputs sharing a stream of 1,024 shards
// through one lease table (lease_period 10s) in this process, with the fake
// Kinesis and dynalite, and reports the time until the shards are balanced
// (every shard owned, the instances within one of each other), the
// DynamoDB calls per second in steady state (idle shards: renewals, scans
// and heartbeats), and what that costs per shard per month at on-demand
// prices. It runs once whatever -benchtime says: make bench-leases.
func BenchmarkLeaseTableScale(b *testing.B) {
	const (
		shards    = 1024
		instances = 16
		period    = 10 * time.Second
		window    = 30 * time.Second
	)
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
		time.Sleep(500 * time.Millisecond)
	}
	balanced := time.Since(start)
	b.Logf("%d shards over %d instances balanced in %v: %v", shards, instances, balanced.Round(100*time.Millisecond), summarize(held))

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
	b.Logf("steady state, idle shards: %.1f DynamoDB calls/s (%s); %.1f write and %.1f read units/s; $%.2f a month, $%.4f per shard", total, strings.Join(ops, ", "), wru, rru, month, month/shards)
	b.ReportMetric(balanced.Seconds(), "s-to-balance")
	b.ReportMetric(total, "ddb-calls/s")
	b.ReportMetric(month/shards, "$/shard/month")
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
