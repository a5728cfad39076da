package promexport

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
)

func TestExporter(t *testing.T) {
	conf, err := Spec().ParseYAML("prefix: bk_\nadd_process_metrics: false\nadd_go_metrics: false", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(conf, service.MockResources().Logger())
	if err != nil {
		t.Fatal(err)
	}
	e.NewCounterCtor("kinesis_records_read", "stream", "shard")("orders", "shardId-0").Incr(3)
	e.NewGaugeCtor("kinesis_millis_behind_latest", "stream", "shard")("orders", "shardId-0").Set(250)
	e.NewTimerCtor("output.latency", "label")("out").Timing(2e6)
	// The same name with other labels is refused, not a panic.
	e.NewCounterCtor("kinesis_records_read", "other")("x").Incr(1)

	rec := httptest.NewRecorder()
	e.HandlerFunc()(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`bk_kinesis_records_read{shard="shardId-0",stream="orders"} 3`,
		`bk_kinesis_millis_behind_latest{shard="shardId-0",stream="orders"} 250`,
		`bk_output_latency_bucket{label="out",le="0.005"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if strings.Contains(string(body), "go_goroutines") {
		t.Error("Go runtime metrics exported although add_go_metrics is false")
	}
}
