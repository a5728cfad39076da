package input

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// leaseYAML is the input's YAML for the fake with a lease table on d.
func leaseYAML(srv *kinesisfake.Server, d *emulator.DynamoDB, table, instance, extra string) string {
	return fakeYAML(srv, "orders", fmt.Sprintf(`
  commit_period: 100ms
  dynamodb: { table: %s, create: true, endpoint: %s, lease_period: 2s, instance_id: %s }`, table, d.Endpoint, instance), extra)
}

// owners scans the table: the owner of every shard item of the stream.
func owners(t *testing.T, d *emulator.DynamoDB, table string) map[string]string {
	t.Helper()
	out, err := d.Client().Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil // not created yet
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range out.Items {
		if k, _ := it["kind"].(*types.AttributeValueMemberS); k == nil || k.Value != "shard" {
			continue
		}
		id := it["shardId"].(*types.AttributeValueMemberS).Value
		owner := ""
		if o, ok := it["leaseOwner"].(*types.AttributeValueMemberS); ok {
			owner = o.Value
		}
		got[id] = owner
	}
	return got
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
	srv := newFake(t, kinesisfake.Stream("orders", 16))
	d := emulator.Dynalite(t)
	const table = "leases"
	var mu sync.Mutex
	var all []inputtest.Got
	outs := make([]*inputtest.Collector, 3)
	pipes := make([]*inputtest.Pipeline, 3)
	for i := range pipes {
		outs[i] = &inputtest.Collector{}
		pipes[i] = inputtest.StartPipelineLogged(t, leaseYAML(srv, d, table, fmt.Sprintf("i%d", i), "reader: polling\npolling: { interval: 200ms }"), outs[i], os.Stderr)
	}
	want := fakeProduce(t, srv, "orders", "a", 2000, 32)

	start := time.Now()
	waitUntil(t, 6*time.Second, func() bool {
		n := spread(owners(t, d, table))
		return n[""] == 0 && n["i0"] >= 5 && n["i1"] >= 5 && n["i2"] >= 5
	})
	t.Logf("16 shards spread %v in %v", spread(owners(t, d, table)), time.Since(start).Round(time.Millisecond))
	waitUntil(t, 30*time.Second, func() bool {
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
	waitUntil(t, 10*time.Second, func() bool {
		n := spread(owners(t, d, table))
		return n["i0"] == 0 && n[""] == 0
	})
	waitUntil(t, 30*time.Second, func() bool {
		n := 0
		for _, o := range outs {
			n += o.Count()
		}
		return n >= len(want)
	})
	time.Sleep(300 * time.Millisecond)
	pipes[1].Stop(t)
	pipes[2].Stop(t)
	mu.Lock()
	defer mu.Unlock()
	for _, o := range outs {
		all = append(all, o.All()...)
		inputtest.CheckOrder(t, o.All())
	}
	inputtest.CheckDelivery(t, all, want, true)
}
