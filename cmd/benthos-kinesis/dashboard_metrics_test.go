package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"gopkg.in/yaml.v3"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// The Grafana dashboard and the autoscaling examples of the config/deploy
// module (its own module, which generates the dashboard with Grafana's SDK).
var (
	dashboardFile   = filepath.Join(deployDir, "grafana", "benthos-kinesis.json")
	autoscalingKEDA = filepath.Join(deployDir, "autoscaling", "keda.yaml")
	autoscalingHPA  = filepath.Join(deployDir, "autoscaling", "hpa.yaml")
)

// dashboardWithin bounds the fleet's part of TestDashboardMetricsExported,
// from the start of the first instance to the last scrape. It is no
// measure: it only decides how long a broken binary takes to fail the
// test, and the suite under -race on two cores is slow.
const dashboardWithin = 2 * time.Minute

// scrapeClient bounds each scrape: a hung instance fails the scrape, not
// the whole test's timeout.
var scrapeClient = &http.Client{Timeout: 5 * time.Second}

// TestDashboardMetricsExported: every metric a query of the Grafana
// dashboard names, and every metric the KEDA and HPA examples scale on, is
// on the /metrics of the running binary. A Prometheus vector shows on
// /metrics only once a series of it is set, so the test makes each happen
// with two instances sharing a stream of 4 shards through a lease table in
// dynalite:
//
//   - A reads by polling, its first GetRecords throttled
//     (kinesis_throttles), its lease table behind a proxy; it takes every
//     lease (kinesis_leases_taken, kinesis_lease_moves) and reads the
//     backlog;
//   - B reads by fan-out and steals half of the leases from A
//     (kinesis_leases_stolen, kinesis_leases_handed_over on A); its first
//     subscription after a checkpoint is refused as Kinesis refuses a
//     sequence number of another shard (kinesis_subscription_errors), and,
//     the shard's records being there, the shard stops
//     (kinesis_shard_stopped);
//   - with records flowing, A's lease table becomes unreachable until its
//     lease writes have failed (kinesis_lease_renewal_failures,
//     kinesis_checkpoint_failures) and B has taken its leases as expired,
//     then reachable again, where A finds them taken (kinesis_leases_lost).
//
// The other series exist from the start.
func TestDashboardMetricsExported(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs 2 processes of the binary with dynalite")
	}
	want := dashboardMetrics(t)
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 4), kinesisfake.Quotas(false),
		kinesisfake.ConsumerActivationDelay(200*time.Millisecond))
	const perShard = 50
	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		if err := srv.PutToShard("orders", *sh.ShardId, perShard, func(i int) []byte { return fmt.Appendf(nil, "%s-%d", *sh.ShardId, i) }); err != nil {
			t.Fatal(err)
		}
	}
	srv.FailNext("GetRecords", 1, "ProvisionedThroughputExceededException")
	var refused atomic.Bool
	srv.Control("SubscribeToShard", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ StartingPosition struct{ Type string } }
		if json.Unmarshal(r.Body, &in) != nil || in.StartingPosition.Type != "AFTER_SEQUENCE_NUMBER" || !refused.CompareAndSwap(false, true) {
			return false, 0, nil
		}
		status, body := kinesisfake.ErrorBody("InvalidArgumentException", "Invalid StartingSequenceNumber. It encodes shardId-000000000099, while it was used in a call to a shard with shardId-000000000000")
		return true, status, body
	})
	ddb := emulator.Dynalite(t)
	proxy := emulator.NewDynamoDBProxy(t, ddb)

	f := &metricsFleet{t: t, bin: bin, dir: dir, srv: srv, ca: ca, deadline: time.Now().Add(dashboardWithin)}
	a := f.start("a", "reader: polling\n    polling: { interval: 200ms }", proxy.Endpoint)
	f.waitUntil(a, "every lease taken and the backlog read and checkpointed", func(p metricsPage) bool {
		return p.total("kinesis_owned_shards") == 4 && p.total("kinesis_records_read") == 4*perShard && p.has("kinesis_records_past_checkpoint") && p.total("kinesis_records_past_checkpoint") == 0
	})
	// From here records flow, so that checkpoints move and A has lease
	// writes to make while its lease table is out of reach.
	f.produce(shards)
	b := f.start("b", "reader: efo\n    efo: { consumer_name: app }", ddb.Endpoint)
	f.waitUntil(b, "leases stolen from a, and a shard stopped on a refused checkpoint", func(p metricsPage) bool {
		return p.total("kinesis_leases_stolen") > 0 && p.has("kinesis_shard_stopped") && p.has("kinesis_subscription_errors")
	})
	f.waitUntil(a, "leases handed over to b", func(p metricsPage) bool { return p.total("kinesis_leases_handed_over") > 0 })

	proxy.Unreachable(time.Hour)
	f.waitUntil(a, "lease writes failing, its lease table out of reach", func(p metricsPage) bool {
		return p.total("kinesis_lease_renewal_failures") > 0 && p.total("kinesis_checkpoint_failures") > 0
	})
	f.waitUntil(b, "every lease taken from a, whose lease table is out of reach", func(p metricsPage) bool { return p.total("kinesis_owned_shards") == 4 })
	proxy.Unreachable(0)
	f.waitUntil(a, "leases found lost once the lease table is back", func(p metricsPage) bool { return p.total("kinesis_leases_lost") > 0 })

	exported := map[string]bool{}
	for _, in := range []*metricsInstance{a, b} {
		for name := range f.scrape(in).names {
			exported[name] = true
		}
	}
	var missing []string
	for _, m := range want {
		if !exported[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		f.dumpLogs()
		t.Fatalf("the dashboard or the autoscaling examples name %d metrics that neither instance's /metrics has: %v (config/deploy/metrics.go declares them)", len(missing), missing)
	}
	t.Logf("all %d metrics named by the dashboard and the autoscalers are exported (the fleet took %v): %v",
		len(want), (dashboardWithin - time.Until(f.deadline)).Round(100*time.Millisecond), want)
}

// dashboardMetrics is every metric the dashboard's queries and variables
// name, and those the KEDA and HPA examples scale on, sorted.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatalf("%v: generate it with `go generate` in config/deploy", err)
	}
	var dash struct {
		Panels     []dashboardPanel
		Templating struct {
			List []struct {
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels) // a collapsed row holds its panels
		}
	}
	walk(dash.Panels)
	var names []string
	add := func(from string, ns ...string) {
		for _, n := range ns {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if len(ns) == 0 {
			t.Errorf("%s names no metric", from)
		}
	}
	for _, e := range exprs {
		ns, err := promqlMetricNames(e)
		if err != nil {
			t.Fatalf("%s: %v", dashboardFile, err)
		}
		add(fmt.Sprintf("%s: query %q", dashboardFile, e), ns...)
	}
	for _, v := range dash.Templating.List {
		// label_values(metric, label): Grafana's, not PromQL.
		if q, ok := v.Query.(string); ok && v.Type == "query" && strings.HasPrefix(q, "label_values(") {
			metric, _, _ := strings.Cut(strings.TrimPrefix(q, "label_values("), ",")
			add(fmt.Sprintf("%s: variable query %q", dashboardFile, q), strings.TrimSpace(metric))
		}
	}

	var keda struct {
		Spec struct {
			Triggers []struct {
				Type     string
				Metadata map[string]string
			}
		}
	}
	readYAML(t, autoscalingKEDA, &keda)
	for _, tr := range keda.Spec.Triggers {
		ns, err := promqlMetricNames(tr.Metadata["query"])
		if err != nil {
			t.Fatalf("%s: %v", autoscalingKEDA, err)
		}
		add(fmt.Sprintf("%s: %s trigger query %q", autoscalingKEDA, tr.Type, tr.Metadata["query"]), ns...)
	}
	var hpa struct {
		Spec struct {
			Metrics []struct {
				External *struct{ Metric struct{ Name string } }
			}
		}
	}
	readYAML(t, autoscalingHPA, &hpa)
	for _, m := range hpa.Spec.Metrics {
		if m.External != nil {
			add(autoscalingHPA+": an External metric", m.External.Metric.Name)
		}
	}
	// Not a vacuous pass: the lag the autoscalers scale on and a process
	// metric are among them.
	for _, n := range []string{"kinesis_stream_millis_behind_latest", "kinesis_lease_moves", "process_resident_memory_bytes"} {
		if !slices.Contains(names, n) {
			t.Fatalf("%s names no %s: found %v", dashboardFile, n, names)
		}
	}
	slices.Sort(names)
	return names
}

// dashboardPanel is what the test reads of a panel of the dashboard.
type dashboardPanel struct {
	Targets []struct{ Expr string }
	Panels  []dashboardPanel
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// metricsFleet runs instances of the binary on stream orders of the fake,
// sharing a lease table, each serving /metrics on its own address.
type metricsFleet struct {
	t        *testing.T
	bin, dir string
	srv      *kinesisfake.Server
	ca       string
	deadline time.Time
	all      []*metricsInstance
}

type metricsInstance struct {
	id, addr, log string
}

// start runs an instance named id with the input's reader fields (YAML,
// indented four spaces after the first line) and its lease table at the
// DynamoDB endpoint ddb.
func (f *metricsFleet) start(id, reader, ddb string) *metricsInstance {
	f.t.Helper()
	in := &metricsInstance{id: id, addr: freeAddr(f.t), log: filepath.Join(f.dir, id+".log")}
	config := filepath.Join(f.dir, id+".yaml")
	conf := fmt.Sprintf(`
http: { address: %s }
input:
  aws_kinesis_streams:
    streams: [ orders ]
    endpoint: %s
    region: %s
    credentials: { id: %s, secret: %s }
    tls: { enabled: true, root_cas_file: %s }
    %s
    start_from: trim_horizon
    checkpoint:
      commit_period: 200ms
      dynamodb:
        table: leases
        create: true
        endpoint: %s
        lease_period: 2s
        instance_id: %s
output:
  drop: {}
logger: { level: info }
`, in.addr, f.srv.Endpoint(), f.srv.Region(), emulator.AccessKeyID, emulator.SecretAccessKey, f.ca, reader, ddb, id)
	if err := os.WriteFile(config, []byte(conf), 0o644); err != nil {
		f.t.Fatal(err)
	}
	run(f.t, f.bin, config, in.log)
	f.all = append(f.all, in)
	return in
}

// waitUntil scrapes in every 100 ms until cond holds, failing the test with
// the last pages and the logs at the fleet's deadline.
func (f *metricsFleet) waitUntil(in *metricsInstance, what string, cond func(metricsPage) bool) {
	f.t.Helper()
	for {
		p := f.scrape(in)
		if cond(p) {
			return
		}
		if time.Now().After(f.deadline) {
			f.dumpLogs()
			f.t.Fatalf("instance %s: not %s within %v of the fleet's start; its /metrics:\n%s", in.id, what, dashboardWithin, p.kinesis())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produce writes a record to each shard every 100 ms until the test ends.
func (f *metricsFleet) produce(shards []types.Shard) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, sh := range shards {
				if err := f.srv.PutToShard("orders", *sh.ShardId, 1, func(int) []byte { return fmt.Appendf(nil, "live-%d", n) }); err != nil {
					return // the fake is closing
				}
			}
		}
	}()
	f.t.Cleanup(func() { close(stop); <-done })
}

func (f *metricsFleet) scrape(in *metricsInstance) metricsPage {
	resp, err := scrapeClient.Get("http://" + in.addr + "/metrics")
	if err != nil {
		return parseMetrics("")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return parseMetrics(string(body))
}

func (f *metricsFleet) dumpLogs() {
	for _, in := range f.all {
		data, _ := os.ReadFile(in.log)
		if len(data) > 16<<10 {
			data = data[len(data)-16<<10:]
		}
		f.t.Logf("log of instance %s (end):\n%s", in.id, data)
	}
}

// metricsPage is a scrape of /metrics in Prometheus' text format.
type metricsPage struct {
	text  string
	names map[string]bool    // the metric of every # TYPE line and sample
	sums  map[string]float64 // the sum of each metric's samples
}

func parseMetrics(text string) metricsPage {
	p := metricsPage{text: text, names: map[string]bool{}, sums: map[string]float64{}}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, _, ok := strings.Cut(rest, " "); ok {
				p.names[name] = true
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		p.names[name] = true
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			p.sums[name] += v
		}
	}
	return p
}

// has reports whether the page has the metric.
func (p metricsPage) has(name string) bool { return p.names[name] }

// total is the sum of the metric's samples, whatever their labels.
func (p metricsPage) total(name string) float64 { return p.sums[name] }

// kinesis is the input's part of the page, for a failure's message.
func (p metricsPage) kinesis() string {
	var lines []string
	for _, line := range strings.Split(p.text, "\n") {
		if strings.HasPrefix(line, "kinesis_") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}
