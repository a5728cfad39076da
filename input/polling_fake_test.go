package input

import (
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestPollingStaysUnderQuotas reads by polling from the fake with AWS's
// quotas on, for long enough to catch up and then follow the tip: not a
// single call is throttled. Then injected throttling slows reading down
// without losing anything.
func TestPollingStaysUnderQuotas(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4), kinesisfake.Quotas(true))
	want := fakeProduce(t, srv, "orders", "a", 20000, 53)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, fakeInput(srv, "orders", t.TempDir(), "reader: polling"), out)
	out.WaitFor(t, len(want), time.Minute)
	// Follow the tip for a while: empty reads must stay under 5 calls/s too.
	for d, pk := range produceFor(t, srv, "orders", "b", 4*time.Second, 200) {
		want[d] = pk
	}
	out.WaitFor(t, len(want), time.Minute)
	for _, op := range []string{"GetRecords", "GetShardIterator", "ListShards", "DescribeStreamSummary"} {
		if n := srv.Throttled(op); n != 0 {
			t.Fatalf("%d %s calls throttled during a steady read", n, op)
		}
	}
	calls := srv.Calls("GetRecords")

	srv.FailNext("GetRecords", 12, "ProvisionedThroughputExceededException") // about 3 in a row a shard: 1.4 s of backoff
	for d, pk := range fakeProduce(t, srv, "orders", "c", 2000, 53) {
		want[d] = pk
	}
	p.StopWhen(t, out, len(want), time.Minute)
	inputtest.CheckDelivery(t, out.All(), want, true)
	inputtest.CheckOrder(t, out.All())
	if srv.Calls("GetRecords")-calls < 12 {
		t.Fatal("the injected throttling was not met")
	}
	t.Logf("%d GetRecords calls before the injected throttling, none throttled", calls)
}
