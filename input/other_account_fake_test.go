package input

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestStreamOfAnotherAccountIsReadByARN: a stream of another account,
// shared by a resource policy, is found only by its ARN. Given the ARN,
// every call the input makes names the stream by it (the fake refuses and
// counts any that does not), by polling and by fan-out with each kind of
// registration, and every record arrives once.
func TestStreamOfAnotherAccountIsReadByARN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra string
		ops         []string // calls the reader must have made
		registered  bool     // the consumer app is registered beforehand
	}{
		{"polling", "reader: polling", []string{"DescribeStreamSummary", "ListShards", "GetShardIterator", "GetRecords"}, false},
		{"efo_lazy", "efo: { consumer_name: app }", []string{"DescribeStreamSummary", "ListShards", "DescribeStreamConsumer", "RegisterStreamConsumer", "SubscribeToShard"}, false},
		{"efo_eager", "efo: { consumer_name: app, registration: eager }", []string{"DescribeStreamSummary", "ListShards", "DescribeStreamConsumer", "SubscribeToShard"}, true},
		{"efo_none", "efo: { registration: none, consumer_arns: { '%s': '%s' } }", []string{"ListShards", "SubscribeToShard"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 3), kinesisfake.Account("111122223333"), kinesisfake.OtherAccount())
			arn := srv.StreamARN("orders")
			extra := tc.extra
			if tc.registered {
				consumer, err := srv.RegisterConsumer("orders", "app")
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(extra, "%s") {
					extra = fmt.Sprintf(extra, arn, consumer)
				}
			}
			want := fakeProduce(t, srv, "orders", "x", 300, 11)
			out := &inputtest.Collector{}
			p := inputtest.StartPipeline(t, fakeInput(srv, "'"+arn+"'", t.TempDir(), extra), out)
			p.StopWhen(t, out, len(want), time.Minute)
			inputtest.CheckDelivery(t, out.All(), want, true)
			for _, op := range []string{"DescribeStream", "DescribeStreamSummary", "ListShards", "GetShardIterator", "GetRecords",
				"RegisterStreamConsumer", "DescribeStreamConsumer", "ListStreamConsumers", "DeregisterStreamConsumer", "SubscribeToShard"} {
				if n := srv.CallsWithoutARN(op); n != 0 {
					t.Errorf("%d %s calls did not name the stream by its ARN", n, op)
				}
			}
			for _, op := range tc.ops {
				if srv.Calls(op) == 0 {
					t.Errorf("no %s call: the test saw nothing of it", op)
				}
			}
		})
	}
}
