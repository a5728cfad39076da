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
	const (
		run  = 60 * time.Second
		tick = 100 * time.Millisecond
		size = 512
	)
	rates := []int{10, 6, 4, 4, 2, 2} // records a tick, per shard
	srv := newFake(t, kinesisfake.Stream("orders", len(rates)))
	d := emulator.Dynalite(t)
	const table = "leases"
	outs := make([]*inputtest.Collector, 3)
	pipes := make([]*inputtest.Pipeline, 3)
	for i := range pipes {
		outs[i] = &inputtest.Collector{}
		yaml := fakeYAML(srv, "orders", fmt.Sprintf(`
  commit_period: 100ms
  dynamodb: { table: %s, create: true, endpoint: %s, lease_period: 2s, instance_id: i%d, balance: %s }`, table, d.Endpoint, i, mode),
			"reader: polling\npolling: { interval: 200ms }")
		pipes[i] = inputtest.StartPipeline(t, yaml, outs[i])
	}

	// The producer: rates[i] records of size bytes per tick to shard i.
	want := inputtest.Produced{}
	var wantMu sync.Mutex
	ctx, cancel := context.WithTimeout(t.Context(), run)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			for s, r := range rates {
				id := fmt.Sprintf("shardId-%012d", s)
				err := srv.PutToShard("orders", id, r, func(j int) []byte {
					data := fmt.Sprintf("s%d-%06d-%02d-", s, n, j)
					data += strings.Repeat("x", size-len(data))
					wantMu.Lock()
					want[data] = "pk"
					wantMu.Unlock()
					return []byte(data)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()

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
	wg.Wait()
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

	wantMu.Lock()
	n := len(want)
	wantMu.Unlock()
	waitUntil(t, 30*time.Second, func() bool {
		got := 0
		for _, o := range outs {
			got += o.Count()
		}
		return got >= n
	})
	var all []inputtest.Got
	for i, p := range pipes {
		p.Stop(t)
		all = append(all, outs[i].All()...)
		inputtest.CheckOrderKeysPerShard(t, outs[i].All()) // one key, "pk", on every shard
	}
	inputtest.CheckDelivery(t, all, want, true)
}

// TestLeasesRebalanceAHotShard: six shards at one rate over three
// instances, two each; then one shard's rate goes ten times up. Its holder
// hands its other shard over within three lease periods, and nothing moves
// back afterwards.
func TestLeasesRebalanceAHotShard(t *testing.T) {
	t.Parallel()
	const (
		tick   = 100 * time.Millisecond
		size   = 512
		period = 2 * time.Second
	)
	srv := newFake(t, kinesisfake.Stream("orders", 6))
	d := emulator.Dynalite(t)
	const table = "leases"
	outs := make([]*inputtest.Collector, 3)
	pipes := make([]*inputtest.Pipeline, 3)
	for i := range pipes {
		outs[i] = &inputtest.Collector{}
		yaml := fakeYAML(srv, "orders", fmt.Sprintf(`
  commit_period: 100ms
  dynamodb: { table: %s, create: true, endpoint: %s, lease_period: %v, instance_id: i%d }`, table, d.Endpoint, period, i),
			"reader: polling\npolling: { interval: 200ms }")
		pipes[i] = inputtest.StartPipeline(t, yaml, outs[i])
	}
	var hot atomic.Int32
	hot.Store(-1)
	want := inputtest.Produced{}
	var wantMu sync.Mutex
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			for s := range 6 {
				r := 2
				if int(hot.Load()) == s {
					r = 20
				}
				err := srv.PutToShard("orders", fmt.Sprintf("shardId-%012d", s), r, func(j int) []byte {
					data := fmt.Sprintf("s%d-%06d-%02d-", s, n, j)
					data += strings.Repeat("x", size-len(data))
					wantMu.Lock()
					want[data] = "pk"
					wantMu.Unlock()
					return []byte(data)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
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
	cancel()
	wg.Wait()
	t.Logf("hot shard held by %s; alone on its holder %v after the step; moves in the 15 s after: %v", holder, took.Round(100*time.Millisecond), moves)
	if took > 3*period {
		t.Errorf("the hot shard's holder held others for %v, want at most three lease periods (%v)", took, 3*period)
	}
	if len(moves) > 0 {
		t.Errorf("leases moved after the rebalance: %v", moves)
	}

	wantMu.Lock()
	n := len(want)
	wantMu.Unlock()
	waitUntil(t, 30*time.Second, func() bool {
		got := 0
		for _, o := range outs {
			got += o.Count()
		}
		return got >= n
	})
	var all []inputtest.Got
	for i, p := range pipes {
		p.Stop(t)
		all = append(all, outs[i].All()...)
		inputtest.CheckOrderKeysPerShard(t, outs[i].All())
	}
	inputtest.CheckDelivery(t, all, want, true)
}
