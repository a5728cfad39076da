package input

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestEFOExactlyOnceFromFake reads 4 shards of 5,000 records each by
// fan-out over HTTP/2 through a whole pipeline.
func TestEFOExactlyOnceFromFake(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4))
	want := fakeProducePerShard(t, srv, "orders", "e", 5000, 25)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out)
	p.StopWhen(t, out, len(want), time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	if n := srv.Calls("GetRecords"); n != 0 {
		t.Fatalf("%d GetRecords calls: the efo reader polled", n)
	}
	if n := srv.Calls("SubscribeToShard"); n < 4 {
		t.Fatalf("%d SubscribeToShard calls for 4 shards", n)
	}
	perShard := map[string]int{}
	for _, m := range msgs {
		perShard[m.Shard]++
	}
	for s, n := range perShard {
		if n != 5000 {
			t.Fatalf("shard %s delivered %d records, want 5000", s, n)
		}
	}
	if len(perShard) != 4 {
		t.Fatalf("records from %d shards, want 4", len(perShard))
	}
}

// TestEFOSplitAndMergeUsesChildShards splits and merges while reading by
// fan-out, with periodic discovery effectively off: children are found from
// the ChildShards of their parents' last events, read after every parent,
// and nothing is lost.
func TestEFOSplitAndMergeUsesChildShards(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2), kinesisfake.SubscriptionHeartbeat(200*time.Millisecond))
	want := fakeProduce(t, srv, "orders", "a", 1000, 64)
	out := &inputtest.Collector{}
	dir := t.TempDir()
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", dir, "efo: { consumer_name: app }\nshard_discovery_interval: 1h"), out)
	out.WaitFor(t, 500, time.Minute)

	children, err := srv.SplitShard("orders", "shardId-000000000000", "")
	if err != nil {
		t.Fatal(err)
	}
	for d, pk := range fakeProduce(t, srv, "orders", "b", 1000, 64) {
		want[d] = pk
	}
	// Merge only once the split parent's end is saved, so that its children
	// are known when the merge's ChildShards name one of them as a parent;
	// else the input rightly asks ListShards about the unknown parent.
	deadline := time.Now().Add(time.Minute)
	for !inputtest.ReadCheckpointsUnlocked(t, dir, srv.StreamARN("orders")).Shards["shardId-000000000000"].Ended {
		if time.Now().After(deadline) {
			t.Fatal("the split parent's end was not saved within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	merged, err := srv.MergeShards("orders", children[1], "shardId-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	for d, pk := range fakeProduce(t, srv, "orders", "c", 1000, 64) {
		want[d] = pk
	}
	p.StopWhen(t, out, len(want), time.Minute)

	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	checkParentsFirst(t, msgs, map[string][]string{
		children[0]: {"shardId-000000000000"},
		children[1]: {"shardId-000000000000"},
		merged:      {children[1], "shardId-000000000001"},
	})
	if n := srv.Calls("ListShards"); n != 1 {
		t.Fatalf("%d ListShards calls: children were found by discovery, not from ChildShards", n)
	}
	for _, id := range []string{children[0], children[1], merged} {
		if !containsShard(msgs, id) {
			t.Fatalf("no record read from shard %s", id)
		}
	}
}

// TestEFODeregisterOnClose: with deregister_on_close a lazy consumer is
// deregistered at a clean close; without it (the default) it stays.
func TestEFODeregisterOnClose(t *testing.T) {
	t.Parallel()
	for _, deregister := range []bool{false, true} {
		t.Run(fmt.Sprint("deregister_on_close=", deregister), func(t *testing.T) {
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
			want := fakeProduce(t, srv, "orders", "d", 20, 3)
			out := &inputtest.Collector{}
			p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), fmt.Sprintf("efo: { consumer_name: app, deregister_on_close: %v }", deregister)), out)
			out.WaitFor(t, len(want), time.Minute)
			p.Stop(t)
			res, err := srv.NewClient().ListStreamConsumers(t.Context(), &kinesis.ListStreamConsumersInput{StreamARN: aws.String(srv.StreamARN("orders"))})
			if err != nil {
				t.Fatal(err)
			}
			active := 0
			for _, c := range res.Consumers {
				if c.ConsumerStatus == types.ConsumerStatusActive {
					active++
				}
			}
			if deregister && active != 0 {
				t.Fatalf("the consumer is still ACTIVE after a clean close with deregister_on_close")
			}
			if !deregister && active != 1 {
				t.Fatalf("%d ACTIVE consumers after a close without deregister_on_close, want 1", active)
			}
			if n := srv.Calls("DeregisterStreamConsumer"); n != map[bool]int{false: 0, true: 1}[deregister] {
				t.Fatalf("%d DeregisterStreamConsumer calls", n)
			}
		})
	}
}

// TestEFORegistrationNoneMakesNoControlPlaneCalls reads through a consumer
// ARN given in the config: no consumer or stream description call at all.
func TestEFORegistrationNoneMakesNoControlPlaneCalls(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
	arn, err := srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	want := fakeProduce(t, srv, "orders", "n", 500, 7)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { registration: none, consumer_arns: { orders: '"+arn+"' } }"), out)
	out.WaitFor(t, len(want), time.Minute)
	p.Stop(t)
	inputtest.CheckDelivery(t, out.All(), want, true)
	for _, op := range []string{"RegisterStreamConsumer", "DescribeStreamConsumer", "ListStreamConsumers", "DeregisterStreamConsumer", "DescribeStreamSummary", "DescribeStream"} {
		if n := srv.Calls(op); n != 0 {
			t.Fatalf("%d %s calls with registration none", n, op)
		}
	}
}

// TestEFOBusyPipelineGetsLargerBatches: while the output is busy, a shard's
// next reads join the batch waiting for it (up to checkpoint.limit), so a
// stream of small events does not become a queue of tiny batches; a shard that
// ends while its reads are being joined still hands over its children in
// order.
func TestEFOBusyPipelineGetsLargerBatches(t *testing.T) {
	t.Parallel()
	// Events of at most 10 records: any larger batch was joined from reads.
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2), kinesisfake.MaxEventRecords(10))
	// The output holds its first batch until everything is written, so a
	// backlog builds up whatever the machine's speed.
	produced := make(chan struct{})
	out := &inputtest.Collector{Slow: 20 * time.Millisecond, Hold: produced}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "efo: { consumer_name: app }"), out)
	want := inputtest.Produced{}
	for i := 0; i < 3000; i++ { // one put, one event, at a time
		d, pk := fmt.Sprintf("a-%07d", i), fmt.Sprintf("key-%d", i%31)
		if _, _, err := srv.Put("orders", pk, []byte(d)); err != nil {
			t.Fatal(err)
		}
		want[d] = pk
		if i == 2000 {
			if _, err := srv.SplitShard("orders", "shardId-000000000000", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(produced)
	p.StopWhen(t, out, len(want), time.Minute)
	msgs := out.All()
	inputtest.CheckDelivery(t, msgs, want, true)
	inputtest.CheckOrder(t, msgs)
	largest := 0
	for _, n := range out.BatchSizes() {
		largest = max(largest, n)
	}
	if largest < 100 {
		t.Fatalf("the largest batch held %d records: reads waiting for a busy output were not joined", largest)
	}
	if largest > 1024 {
		t.Fatalf("a batch of %d records: joined past checkpoint.limit", largest)
	}
	t.Logf("%d batches, the largest %d records", len(out.BatchSizes()), largest)
}
