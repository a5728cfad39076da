package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// printTable prints the medians over the rounds of each scenario's figures.
// Ratios are taken within each round (a scenario over its baseline run just
// before it), then the median of those is shown, so that a change of the
// machine's load between rounds does not skew them: ratio is records/s over
// the baseline's (above 1: faster), CPU ratio CPU time per record over the
// baseline's (above 1: costlier).
func printTable(w io.Writer, cfg fakeConfig, rounds int, selected []scenario, results map[string][]result) error {
	calls := (cfg.records/cfg.shards + getRecordsLimit - 1) / getRecordsLimit
	fmt.Fprintf(w, "%d records of %d bytes over %d shards (kpl: %d user records per aggregate); %d rounds, medians; %s, GOMAXPROCS %d\n",
		cfg.records, cfg.size, cfg.shards, cfg.aggregate, rounds, runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "polling floor: %d GetRecords calls per shard %v apart = %v at least\n",
		calls, polling.MinInterval, time.Duration(calls-1)*polling.MinInterval)
	if cfg.quotas {
		fmt.Fprint(w, "AWS's read quotas on: 5 calls/s and 2 MiB/s per shard (GetRecords, and each subscription)\n")
	} else {
		fmt.Fprint(w, "quotas off: a shard serves as fast as it is read, beyond AWS's 2 MiB/s\n")
	}
	fmt.Fprint(w, "CPU time and allocations are the whole process's, the fake's included\n\n")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trecords/s\tMB/s\tratio\tCPU ratio\tvs\tfirst ms\tCPU µs/rec\tallocs/rec\tpeak heap MB\theap growth MB\t")
	for _, s := range selected {
		rs := results[s.name]
		rate := median(rs, result.rate)
		ratio, cpuRatio, vs := "", "", ""
		if base, ok := results[s.baseline]; ok {
			vs = s.baseline
			ratio = fmt.Sprintf("%.2f", medianRatio(rs, base, result.rate))
			cpuRatio = fmt.Sprintf("%.2f", medianRatio(rs, base, result.cpuPerRecord))
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\t%s\t%s\t%.0f\t%.2f\t%.1f\t%.0f\t%.0f\t\n", s.name,
			rate, rate*float64(cfg.size)/1e6, ratio, cpuRatio, vs,
			median(rs, func(r result) float64 { return float64(r.first) / 1e6 }),
			median(rs, result.cpuPerRecord),
			median(rs, func(r result) float64 { return float64(r.mallocs) / float64(r.records) }),
			median(rs, func(r result) float64 { return float64(r.peakHeap) / 1e6 }),
			median(rs, func(r result) float64 { return (float64(r.peakHeap) - float64(r.baseHeap)) / 1e6 }))
	}
	return tw.Flush()
}

// median is the median over runs of f of a run.
func median[R any](rs []R, f func(R) float64) float64 {
	vs := collect(rs, f)
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// collect is f of each of rs.
func collect[R any](rs []R, f func(R) float64) []float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	return vs
}

// medianRatio is the median over rounds of f of a run over f of its round's
// baseline run.
func medianRatio(rs, base []result, f func(result) float64) float64 {
	ratios := make([]float64, len(rs))
	for i := range rs {
		ratios[i] = f(rs[i]) / f(base[i])
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}
