package input

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestLeasesBalanceByCount runs three instances with balance: count on six
// shards written at rates 5:3:2:2:1:1 for 30 s: every instance holds two
// shards, whatever their loads, and every record arrives exactly once, in
// order per shard. (The balance by load is tested on processes of the
// binary: cmd/benthos-kinesis/lease_balance_test.go.)
func TestLeasesBalanceByCount(t *testing.T) {
	t.Parallel()
	rates := []int{10, 6, 4, 4, 2, 2} // records a tick, per shard
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", len(rates)))
	d := emulator.Dynalite(t)
	const table = "leases"
	outs, pipes := loadInstances(t, srv, d, table, "lease_period: 2s, balance: count")
	prod := produceAtRates(t, srv, len(rates), func(s int) int { return rates[s] })
	var held map[string]int
	inputtest.WaitUntil(t, 30*time.Second, func() bool {
		held = spread(owners(t, d, table))
		return held["i0"] == 2 && held["i1"] == 2 && held["i2"] == 2
	})
	// Loads measured and published: the count still decides.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if held = spread(owners(t, d, table)); held["i0"] != 2 || held["i1"] != 2 || held["i2"] != 2 {
			t.Fatalf("by count the holdings became %v, want two each", held)
		}
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
	inputtest.WaitUntil(t, 30*time.Second, func() bool {
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
