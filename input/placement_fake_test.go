package input

import (
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestStreamThatPlacesRecordsItself: two on-demand streams hold the same
// kind of aggregates (user records of every shard's keys, as the
// kinesis-aggregation libraries write them), one placing records by
// partition key, one by itself (AUTO). By polling and by fan-out, every
// record arrives once from both; on the AUTO stream none is flagged out of
// its shard's range and nothing warns, while on the other exactly those
// whose key hashes outside their shard are, as before. The start line says
// that the AUTO stream places records itself and keeps no order per key,
// and kinesis_stream_auto_placement is 1 for it, 0 for the other.
func TestStreamThatPlacesRecordsItself(t *testing.T) {
	t.Parallel()
	for _, reader := range []string{"polling", "efo"} {
		t.Run(reader, func(t *testing.T) {
			t.Parallel()
			srv := inputtest.NewFake(t, kinesisfake.Stream("spread", 4, kinesisfake.AutoDistribution()), kinesisfake.Stream("bykey", 4, kinesisfake.OnDemand()))
			client := srv.NewClient()
			mix := inputtest.AggregateMix{Aggregates: 20, MinUsers: 10, MaxUsers: 30, Plain: 10, Style: inputtest.MixedKeysStyle, Seed: 7}
			spread := inputtest.ProduceAggregated(t, client, "spread", "s", mix)
			bykey := inputtest.ProduceAggregated(t, client, "bykey", "k", mix)
			want := inputtest.Produced{}
			outside := 0
			for _, prod := range []inputtest.AggregatedOutput{spread, bykey} {
				for d, pk := range prod.Users {
					want[d] = pk
				}
			}
			for _, p := range spread.Placed {
				if p.OutOfRange {
					outside++
				}
			}
			if outside == 0 {
				t.Fatal("no user record of the AUTO stream lies outside its shard's range: the test shows nothing")
			}
			out := &inputtest.Collector{}
			logs := &inputtest.Logs{}
			metrics := &inputtest.Metrics{}
			extra := "reader: polling"
			if reader == "efo" {
				extra = "efo: { consumer_name: app }"
			}
			p := inputtest.StartPipelineWith(t, fakeInput(srv, "spread, bykey", t.TempDir(), extra), out.Consume, inputtest.Options{Logs: logs, Metrics: metrics})
			p.StopWhen(t, out, len(want), time.Minute)
			msgs := out.All()
			inputtest.CheckDelivery(t, msgs, want, true)
			var fromSpread, fromByKey []inputtest.Got
			for _, m := range msgs {
				if strings.HasPrefix(m.Data, "s-") {
					fromSpread = append(fromSpread, m)
				} else {
					fromByKey = append(fromByKey, m)
				}
			}
			for _, m := range fromSpread {
				if m.OutOfRange {
					t.Fatalf("user record %s of the AUTO stream is flagged out of its shard's range", m.Data)
				}
			}
			if flagged := inputtest.CheckPlacement(t, fromByKey, bykey.Placed); flagged == 0 {
				t.Fatal("no user record of the stream placed by key was flagged: the check is gone")
			}
			for _, l := range logLines(logs, "outside the shard's range") {
				if strings.Contains(l, "stream spread") {
					t.Errorf("the AUTO stream warned of user records outside their shard's range: %s", l)
				}
			}
			if !hasLine(logs.String(), "stream spread places records itself (record distribution AUTO)", "no order per key exists") {
				t.Errorf("nothing said the AUTO stream places records itself:\n%s", logs)
			}
			if hasLine(logs.String(), "stream bykey places records itself") {
				t.Errorf("the stream placed by key was said to place records itself")
			}
			for stream, v := range map[string]int64{"spread": 1, "bykey": 0} {
				if got := metrics.Counter("kinesis_stream_auto_placement", "stream", stream); got != v {
					t.Errorf("kinesis_stream_auto_placement{stream=%s} = %d, want %d", stream, got, v)
				}
			}
			t.Logf("%d of the AUTO stream's user records lie outside their shard's range; none flagged", outside)
		})
	}
}
