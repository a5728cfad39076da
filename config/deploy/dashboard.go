package deploy

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	statpanel "github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

//go:generate go test -run ^TestDashboardIsGenerated$ -update

// DashboardFile is the generated Grafana dashboard, relative to this
// module; TestDashboardIsGenerated fails while it differs from what this
// code generates.
const DashboardFile = "grafana/benthos-kinesis.json"

// rows is the dashboard, top to bottom. A panel is one entry of its row
// (graph or stat), laid out by widths, so adding one is adding a line here.
var rows = []row{
	{"Lag", []panel{
		graph("Lag per stream", "ms", "The most behind of each stream's shards, over every instance (kinesis_stream_millis_behind_latest): how far the fleet is from the tip. The KEDA and HPA examples of config/deploy/autoscaling scale on it.",
			q(maxBy(streamMillisBehind.now(), "stream"), "{{stream}}")),
		graph("Lag per shard", "ms", "How far each shard's reader is from the tip (kinesis_millis_behind_latest), as the instance reading it reports at each read: a shard that stopped (Stopped shards) or waits on a stalled output keeps its last value while it falls behind. An instance that no longer reads a shard reports 0 for it.",
			q(maxBy(millisBehind.now(), "stream", "shard"), "{{stream}} {{shard}}")),
	}},
	{"Throughput", []panel{
		graph("Records read /s per stream", "short", "Kinesis records read (kinesis_records_read): a KPL aggregate counts once, however many user records it holds (Benthos' input_received counts messages).",
			q(sumBy(rate(recordsRead), "stream"), "{{stream}}")),
		graph("Records read /s per instance", "short", "Records read by each instance (kinesis_records_read): the lease table spreads shards, not records, so a busy shard weighs on its reader.",
			q(sumBy(rate(recordsRead), perInstance...), "{{pod}} {{instance}}")),
		graph("Bytes read /s per stream", "binBps", "Record data read from Kinesis (kinesis_bytes_read); a shard serves at most 2 MiB/s to each fan-out consumer, and 2 MiB/s shared by every polling reader.",
			q(sumBy(rate(bytesRead), "stream"), "{{stream}}")),
	}},
	{"Leases", []panel{
		graph("Owned shards per instance", "short", "Shards whose lease each instance holds (kinesis_owned_shards), stacked: the top is every shard held, the stream's open shards once the leases settle; the lease table evens them out within a few lease periods of an instance coming or going. More instances than shards leave some with none.",
			q(sumBy(ownedShards.now(), perInstance...), "{{pod}} {{instance}}")).stack(),
		graph("Lease moves by cause", "short", "Leases that came to an instance, by cause (kinesis_lease_moves): free (never held, or released), expired (its holder stopped renewing it), count or load (asked of a live holder to even out the count or the load).",
			q(sumBy(increase(leaseMoves), "cause"), "{{cause}}")),
		graph("Leases taken, stolen, handed over, lost", "short", "Taken free or expired, stolen (asked of a live holder and received), handed over after their last checkpoint, and lost (found taken by another instance: its records since the last checkpoint are read again).",
			q(sum(increase(leasesTaken)), "taken"),
			q(sum(increase(leasesStolen)), "stolen"),
			q(sum(increase(leasesHandedOver)), "handed over"),
			q(sum(increase(leasesLost)), "lost")),
		graph("Lease renewal age", "ms", "Time since the oldest lease each instance holds was last renewed (kinesis_lease_renewal_age_ms): past lease_period the lease may be taken.",
			q(maxBy(renewalAge.now(), perInstance...), "{{pod}} {{instance}}")),
		stat("Instances on another config", "Live instances of each instance's lease group that run another pipeline config (kinesis_group_config_mismatch), the most any instance sees: two pipelines in one group each read only part of the stream. The log names them and the part that differs; give each pipeline its own checkpoint.dynamodb.group.",
			q(maxBy(configMismatch.now(), "stream"), "{{stream}}")),
	}},
	{"Errors", []panel{
		graph("AWS calls failed /s by class", "short", "Calls to Kinesis and DynamoDB that failed, once each after the AWS SDK's retries (kinesis_api_errors), by service, operation and class: throttled (a quota), recoverable (time-outs, 5xx), retryable (other service errors), fatal (access denied, a wrong argument; retried, but they do not heal by themselves).",
			q(sumBy(rate(apiErrors), "service", "operation", "class"), "{{service}} {{operation}} {{class}}")),
		graph("DynamoDB errors /s", "short", "Lease writes that failed (kinesis_lease_renewal_failures) and commits to the lease table or checkpoint store that failed (kinesis_checkpoint_failures); both are retried.",
			q(sumBy(rate(renewalFailures), "stream"), "lease renewal {{stream}}"),
			q(sumBy(rate(checkpointFailures), "stream"), "checkpoint {{stream}}")),
		graph("Kinesis errors /s by class", "short", "Fan-out subscriptions that failed, by class (kinesis_subscription_errors: recoverable, retryable, throttled, fatal), and polling reads throttled (kinesis_throttles).",
			q(sumBy(rate(subscriptionErrors), "class"), "subscription {{class}}"),
			q(sumBy(rate(throttles), "stream"), "GetRecords throttled {{stream}}")),
		stat("Stopped shards", "Shards not read because their stored position is not one of the shard (kinesis_shard_stopped): the log names the command that sets it again.",
			q(sum(shardStopped.now()), "")),
		stat("Broken checkpoints", "Shards not read because what is stored for them cannot be read (kinesis_broken_checkpoints); `benthos-kinesis checkpoint show` prints them BROKEN.",
			q(maxBy(brokenCheckpoints.now(), "stream"), "{{stream}}")),
	}},
	{"Acknowledgements and memory", []panel{
		graph("Records past the checkpoint", "short", "Records read past each stream's checkpoints (kinesis_records_past_checkpoint): all of them would be read again after a crash.",
			q(sumBy(pastCheckpoint.now(), "stream"), "{{stream}}")),
		graph("Unacknowledged records", "short", "Records handed to the pipeline and not yet acknowledged (kinesis_records_unacknowledged); stuck at checkpoint.limit times the shards read, the output is the bottleneck.",
			q(sumBy(unacknowledged.now(), "stream"), "{{stream}}")),
		graph("Bytes in flight per instance", "bytes", "What the records read and not yet acknowledged hold of memory_limit (kinesis_bytes_in_flight), and what they may hold (kinesis_bytes_in_flight_limit: the records' part of memory_limit, less what the shards read hold of their own beyond a quarter of it).",
			q(sumBy(bytesInFlight.now(), perInstance...), "{{pod}} {{instance}}"),
			q(sumBy(inFlightLimit.now(), perInstance...), "limit {{pod}} {{instance}}")),
		graph("Memory per instance", "bytes", "Resident memory of each instance's process (process_resident_memory_bytes) and the Go runtime's soft limit (go_gc_gomemlimit_bytes, memory_limit + 24 MiB, and more for many shards, unless GOMEMLIMIT sets it).",
			q(ofInstancesWith(residentMemory.now(), bytesInFlight), "resident {{pod}} {{instance}}"),
			q(ofInstancesWith(goMemLimit.now(), bytesInFlight), "Go limit {{pod}} {{instance}}")),
	}},
}

// row is a titled row of panels.
type row struct {
	title  string
	panels []panel
}

// panel is a graph (a time series, its series stacked or not) or a stat
// (the current value, red from 1 on) with its queries.
type panel struct {
	stat, stacked            bool
	title, unit, description string
	queries                  []query
}

// query is an expression and its legend (Grafana's {{label}} template).
type query struct {
	expr   expr
	legend string
}

func q(e expr, legend string) query { return query{e, legend} }

func graph(title, unit, description string, qs ...query) panel {
	return panel{title: title, unit: unit, description: description, queries: qs}
}

// stack stacks the graph's series: for parts of a whole.
func (p panel) stack() panel {
	p.stacked = true
	return p
}

func stat(title, description string, qs ...query) panel {
	return panel{stat: true, title: title, unit: "short", description: description, queries: qs}
}

// sum adds every series of e up into one.
func sum(e expr) expr { return sumBy(e) }

const (
	gridWidth   = 24 // Grafana's grid
	panelHeight = 8
	statWidth   = 4 // a single number needs little room
)

// datasource is every query's: the dashboard's datasource variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// Dashboard builds the dashboard of rows.
func Dashboard() (dashboard.Dashboard, error) { return buildDashboard(rows) }

func buildDashboard(rows []row) (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("benthos-kinesis fleet").
		Uid("benthos-kinesis-fleet").
		Description("Instances of benthos-kinesis (aws_kinesis_streams) sharing the shards of Kinesis streams through a DynamoDB lease table, from their Prometheus metrics. Generated by config/deploy/dashboard.go.").
		Tags([]string{"benthos-kinesis", "kinesis"}).
		Editable().
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Prometheus").
			Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder(streamVar).
			Label("Stream").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr(fmt.Sprintf("label_values(%s, stream)", streamMillisBehind.name))}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*"))
	// Panels and rows are numbered in order: Grafana links to a panel by
	// its id, so the ids must be unique.
	id := uint32(0)
	for _, r := range rows {
		id++
		b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		ws := widths(r.panels)
		for i, p := range r.panels {
			id++
			pb, err := p.builder(id, ws[i])
			if err != nil {
				return dashboard.Dashboard{}, fmt.Errorf("row %q, panel %q: %w", r.title, p.title, err)
			}
			b.WithPanel(pb)
		}
	}
	return b.Build()
}

// DashboardJSON is the dashboard as DashboardFile holds it.
func DashboardJSON() ([]byte, error) {
	d, err := Dashboard()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// widths lays a row out on the grid: each stat statWidth, the graphs the
// rest evenly (the last one what division leaves over), so that a row is
// always full width.
func widths(ps []panel) []uint32 {
	graphs, rest := 0, gridWidth
	for _, p := range ps {
		if p.stat {
			rest -= statWidth
		} else {
			graphs++
		}
	}
	ws := make([]uint32, len(ps))
	last := -1
	for i, p := range ps {
		switch {
		case p.stat:
			ws[i] = statWidth
		default:
			ws[i], last = uint32(rest/graphs), i
		}
	}
	if last >= 0 {
		ws[last] += uint32(rest % graphs)
	}
	return ws
}

// targets are the panel's queries for the SDK, named A, B, ...
func (p panel) targets() ([]cog.Builder[variants.Dataquery], error) {
	if len(p.queries) == 0 {
		return nil, fmt.Errorf("no query")
	}
	var ts []cog.Builder[variants.Dataquery]
	for i, qu := range p.queries {
		if qu.expr.err != nil {
			return nil, qu.expr.err
		}
		q := prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Datasource(datasource).
			Expr(qu.expr.text).
			LegendFormat(qu.legend)
		// A stat is the value now: a range would keep showing the last
		// point of a series that ended (an instance gone) for the whole
		// range.
		if p.stat {
			q = q.Instant()
		} else {
			q = q.Range()
		}
		ts = append(ts, q)
	}
	return ts, nil
}

func (p panel) builder(id, width uint32) (cog.Builder[dashboard.Panel], error) {
	ts, err := p.targets()
	if err != nil {
		return nil, err
	}
	if p.stat {
		return statpanel.NewPanelBuilder().
			Id(id).Title(p.title).Description(p.description).Unit(p.unit).
			Datasource(datasource).Targets(ts).
			Span(width).Height(panelHeight).
			ColorMode(common.BigValueColorModeBackground).
			GraphMode(common.BigValueGraphModeNone).
			Orientation(common.VizOrientationAuto).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
			// The gauges these stats read exist only once something
			// happened (a shard stopped): no series is 0, not "No data".
			NoValue("0").
			Thresholds(dashboard.NewThresholdsConfigBuilder().
				Mode(dashboard.ThresholdsModeAbsolute).
				Steps([]dashboard.Threshold{{Color: "green"}, {Value: cog.ToPtr(1.0), Color: "red"}})), nil
	}
	fill, stacking := 10.0, common.StackingModeNone
	if p.stacked {
		fill, stacking = 40, common.StackingModeNormal
	}
	return timeseries.NewPanelBuilder().
		Id(id).Title(p.title).Description(p.description).Unit(p.unit).
		Datasource(datasource).Targets(ts).
		Span(width).Height(panelHeight).
		Min(0).
		FillOpacity(fill).
		Stacking(common.NewStackingConfigBuilder().Mode(stacking)).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending)), nil
}
