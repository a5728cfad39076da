package input

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestLeasesBalanceByLoad runs three instances on six shards written at
// rates 5:3:2:2:1:1 for 60 s. By throughput, the busiest instance's output
// over the last 30 s is at most 1.25 times the mean instance's (any split
// by count gives 1.29 or more: the 5 is paired with something), with at
// most 2 lease moves in those 30 s; by count, every instance holds two
// shards. Every record arrives exactly once, in order per shard.
func TestLeasesBalanceByLoad(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"throughput", "count"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testLeasesBalanceByLoad(t, mode)
		})
	}
}

func testLeasesBalanceByLoad(t *testing.T, mode string) {
	const run = 60 * time.Second
	rates := []int{10, 6, 4, 4, 2, 2} // records a tick, per shard
	srv := newFake(t, kinesisfake.Stream("orders", len(rates)))
	d := emulator.Dynalite(t)
	const table = "leases"
	outs, pipes := loadInstances(t, srv, d, table, "lease_period: 2s, balance: "+mode)
	prod := produceAtRates(t, srv, len(rates), func(s int) int { return rates[s] })

	// Owners every 250 ms; moves in the second half.
	start := time.Now()
	half := start.Add(run / 2)
	var moves []string
	var counts [3]int // at half time
	snapped := false
	last := map[string]string{}
	for time.Since(start) < run {
		if !snapped && time.Now().After(half) {
			snapped = true
			for i, o := range outs {
				counts[i] = o.Count()
			}
		}
		for key, owner := range owners(t, d, table) {
			if prev, ok := last[key]; ok && prev != owner && time.Now().After(half) {
				moves = append(moves, fmt.Sprintf("%s: %s -> %s at %v", key[strings.LastIndex(key, ":")+1:], prev, owner, time.Since(start).Round(time.Second)))
			}
			last[key] = owner
		}
		time.Sleep(250 * time.Millisecond)
	}
	var rate [3]float64
	var total float64
	for i, o := range outs {
		rate[i] = float64(o.Count()-counts[i]) / (run / 2).Seconds()
		total += rate[i]
	}
	held := spread(last)
	t.Logf("%s: records/s over the last 30 s by instance %.0f, holdings %v, moves in the last 30 s %v", mode, rate, held, moves)

	switch mode {
	case "throughput":
		mean := total / 3
		busiest := max(rate[0], rate[1], rate[2])
		if busiest > 1.25*mean {
			t.Errorf("the busiest instance output %.0f records/s, %.2f times the mean %.0f: want at most 1.25", busiest, busiest/mean, mean)
		}
		if len(moves) > 2 {
			t.Errorf("%d lease moves in the last 30 s, want at most 2: %v", len(moves), moves)
		}
	case "count":
		for i := range 3 {
			if n := held[fmt.Sprintf("i%d", i)]; n != 2 {
				t.Errorf("by count instance i%d holds %d shards, want 2 (%v)", i, n, held)
			}
		}
	}
	drainAndCheck(t, prod, outs, pipes)
}

// TestLeasesRebalanceAHotShard: six shards at one rate over three
// instances, two each; then one shard's rate goes ten times up. Its holder
// hands its other shard over within three lease periods, and nothing moves
// back afterwards.
func TestLeasesRebalanceAHotShard(t *testing.T) {
	t.Parallel()
	const period = 2 * time.Second
	srv := newFake(t, kinesisfake.Stream("orders", 6))
	d := emulator.Dynalite(t)
	const table = "leases"
	outs, pipes := loadInstances(t, srv, d, table, fmt.Sprintf("lease_period: %v", period))
	var hot atomic.Int32
	hot.Store(-1)
	prod := produceAtRates(t, srv, 6, func(s int) int {
		if int(hot.Load()) == s {
			return 20
		}
		return 2
	})
	shardOwners := func() map[string]string {
		out := map[string]string{}
		for key, owner := range owners(t, d, table) {
			out[key[strings.LastIndex(key, ":")+1:]] = owner
		}
		return out
	}
	// Settled by count (equal loads): two each.
	waitUntil(t, 30*time.Second, func() bool {
		n := spread(shardOwners())
		return n["i0"] == 2 && n["i1"] == 2 && n["i2"] == 2
	})
	time.Sleep(3 * period) // loads measured and published
	before := shardOwners()
	hot.Store(0)
	const hotShard = "shardId-000000000000"
	holder := before[hotShard]
	stepped := time.Now()
	waitUntil(t, 3*period+2*time.Second, func() bool {
		o := shardOwners()
		return spread(o)[o[hotShard]] == 1
	})
	took := time.Since(stepped)
	settled := shardOwners()
	var moves []string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		for id, owner := range shardOwners() {
			if owner != settled[id] {
				moves = append(moves, fmt.Sprintf("%s: %s -> %s", id, settled[id], owner))
				settled[id] = owner
			}
		}
	}
	t.Logf("hot shard held by %s; alone on its holder %v after the step; moves in the 15 s after: %v", holder, took.Round(100*time.Millisecond), moves)
	if took > 3*period {
		t.Errorf("the hot shard's holder held others for %v, want at most three lease periods (%v)", took, 3*period)
	}
	if len(moves) > 0 {
		t.Errorf("leases moved after the rebalance: %v", moves)
	}
	drainAndCheck(t, prod, outs, pipes)
}

// loadInstances starts three inputs on one lease table of d, instances i0
// to i2, with dynamo appended to their checkpoint.dynamodb settings.
func loadInstances(t *testing.T, srv *kinesisfake.Server, d *emulator.DynamoDB, table, dynamo string) ([]*inputtest.Collector, []*inputtest.Pipeline) {
	outs := make([]*inputtest.Collector, 3)
	pipes := make([]*inputtest.Pipeline, 3)
	for i := range pipes {
		outs[i] = &inputtest.Collector{}
		yaml := fakeYAML(srv, "orders", fmt.Sprintf(`
  commit_period: 100ms
  dynamodb: { table: %s, create: true, endpoint: %s, instance_id: i%d, %s }`, table, d.Endpoint, i, dynamo),
			"reader: polling\npolling: { interval: 200ms }")
		pipes[i] = inputtest.StartPipeline(t, yaml, outs[i])
	}
	return outs, pipes
}

// rateProducer writes, every 100 ms until stop is called, perTick(s)
// records of 512 bytes to each of shards shards; want holds what it wrote.
type rateProducer struct {
	mu   sync.Mutex
	want inputtest.Produced
	stop func()
}

func produceAtRates(t *testing.T, srv *kinesisfake.Server, shards int, perTick func(shard int) int) *rateProducer {
	const size = 512
	p := &rateProducer{want: inputtest.Produced{}}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	p.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(p.stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			for s := range shards {
				err := srv.PutToShard("orders", fmt.Sprintf("shardId-%012d", s), perTick(s), func(j int) []byte {
					data := fmt.Sprintf("s%d-%06d-%02d-", s, n, j)
					data += strings.Repeat("x", size-len(data))
					p.mu.Lock()
					p.want[data] = "pk"
					p.mu.Unlock()
					return []byte(data)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	return p
}

// drainAndCheck stops the producer, waits for every record it wrote, stops
// the pipelines and checks that each arrived once, in order per shard.
func drainAndCheck(t *testing.T, p *rateProducer, outs []*inputtest.Collector, pipes []*inputtest.Pipeline) {
	p.stop()
	n := len(p.want)
	waitUntil(t, 30*time.Second, func() bool {
		got := 0
		for _, o := range outs {
			got += o.Count()
		}
		return got >= n
	})
	var all []inputtest.Got
	for i, pipe := range pipes {
		pipe.Stop(t)
		all = append(all, outs[i].All()...)
		inputtest.CheckOrderKeysPerShard(t, outs[i].All()) // one key, "pk", on every shard
	}
	inputtest.CheckDelivery(t, all, p.want, true)
}
