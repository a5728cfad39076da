// Command kinesis-bench measures the aws_kinesis_streams input against bare
// aws-sdk-go-v2 read loops, in one process, over one in-process fake Kinesis
// (internal/kinesisfake, TLS and HTTP/2, quotas off) holding the same records
// for every scenario. It prints a table whose ratios compare each scenario
// with its baseline measured in the same round:
//
//	input-polling / sdk-polling, input-efo / sdk-efo, input-efo-kpl / input-efo,
//	input-*-strict / input-* (what strict_order costs)
//
// Usage:
//
//	kinesis-bench -records 200000 -shards 4 -size 200 -rounds 3
//	kinesis-bench -scenarios input-efo -cpuprofile efo.pprof
//	kinesis-bench -scenarios input-efo -set auto_replay_nacks=false
//	kinesis-bench -scenarios input-efo-strict -shards 1 -output-delay 2ms
//	kinesis-bench -process bin/benthos-kinesis -readers polling,efo
//	kinesis-bench -latency -rate 1000 -duration 10s
//	kinesis-bench -process bin/benthos-kinesis -idle 20s -shard-counts 64,256,512
//	kinesis-bench -process bin/benthos-kinesis -fleet 60s -plot config/deploy/grafana
//
// A scenario's baseline always runs with it. Each round runs every scenario
// once, in the order of the table, after -warmup rounds that are not
// reported; the table shows medians over the rounds.
// With -cpuprofile every run carries the pprof label scenario=<name> (the
// fake's own goroutines carry none): go tool pprof -tagfocus
// 'scenario=^input-efo$'.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kinesis-bench:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kinesis-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		records    = fs.Int("records", 200_000, "records (user records for input-efo-kpl) to read in each run")
		shards     = fs.Int("shards", 4, "shards of each stream")
		size       = fs.Int("size", 200, "bytes of data per record")
		aggregate  = fs.Int("aggregate", 100, "user records per KPL aggregate (input-efo-kpl)")
		names      = fs.String("scenarios", strings.Join(scenarioNames(), ","), "scenarios to run, comma-separated; their baselines are added")
		rounds     = fs.Int("rounds", 3, "rounds; the table shows the median of each figure")
		warmup     = fs.Int("warmup", 1, "rounds run first and not reported (the first runs of a process pay for growing its heap)")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the runs (labelled scenario=<name>) to this file")
		outDelay   = fs.Duration("output-delay", 0, "time the input scenarios' output takes for each batch, as a real output's round trip does")
		process    = fs.String("process", "", "instead of the scenarios: run this benthos-kinesis binary as a process draining the plain stream, by each of -readers, and report its peak resident memory")
		readers    = fs.String("readers", "polling,efo", "with -process or -latency: the readers to run")
		latency    = fs.Bool("latency", false, "instead of the scenarios: put -rate records per second while the input reads them, by each of -readers, and report the delay from put to output (p50, p99, p99.9)")
		rate       = fs.Int("rate", 1000, "with -latency: records put per second")
		duration   = fs.Duration("duration", 10*time.Second, "with -latency: how long each reader is measured, after a second of warm-up")
		idle       = fs.Duration("idle", 0, "with -process: instead of draining, read empty streams of each of -shard-counts shards (AWS quotas on) and report the time until every shard is read, then RSS, CPU and goroutines over this long")
		counts     = fs.String("shard-counts", "64,256,512", "with -idle: the stream sizes")
		busyRecs   = fs.Int("busy-records", defaultBusyPerShard, "with -idle: the records per shard that the same binary drains after each idle run")
		quotas     = fs.Bool("quotas", false, "the scenarios read with AWS's read quotas on (5 calls/s and 2 MiB/s per shard, for GetRecords and each subscription), as on AWS")
		fleet      = fs.Duration("fleet", 0, "with -process: instead of draining, run 3 processes of the binary sharing 2 streams (a backlog, then records written steadily; AWS quotas on) through a lease table in dynalite for this long, one joining at a sixth and one stopped at two thirds, scraping their /metrics every second, and print the dashboard's main figures and the lease table's DynamoDB calls, units and monthly cost")
		plotDir    = fs.String("plot", "", "with -latency or -idle: write PNG plots of the figures into this directory; with -fleet: the dashboard's main panels as dashboard.png")
		heapprof   = fs.String("heapprofile", "", "with -process: write the binary's heap profile nearest its peak memory to this file, suffixed .<reader> (and its memory statistics, suffixed .<reader>.txt, and a CPU profile of its first 2 s of draining, .<reader>.cpu); with -idle, at the end of each idle window, suffixed .<reader>.<shards>, with its goroutines and memory map too")
		set        settings
	)
	fs.Var(&set, "set", "a field of the input's configuration in the input scenarios, as path=value, e.g. checkpoint.limit=20000 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records < *shards || *shards < 1 || *size < 1 || *aggregate < 1 || *rounds < 1 || *warmup < 0 {
		return fmt.Errorf("want -records >= -shards >= 1, -size, -aggregate and -rounds >= 1, -warmup >= 0")
	}
	if *latency {
		return runLatency(stdout, stderr, fakeConfig{shards: *shards, set: set}, strings.Split(*readers, ","), *rate, *duration, *plotDir)
	}
	if *fleet > 0 {
		if *process == "" {
			return fmt.Errorf("-fleet runs the binary: give its path with -process, e.g. -process bin/benthos-kinesis")
		}
		return runFleet(stdout, stderr, *process, *fleet, *plotDir)
	}
	if *process != "" && *idle > 0 {
		var ns []int
		for _, c := range strings.Split(*counts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || n < 1 {
				return fmt.Errorf("-shard-counts: %q is not a number of shards", c)
			}
			ns = append(ns, n)
		}
		return runIdle(stdout, stderr, fakeConfig{set: set}, *process, strings.Split(*readers, ","), ns, *busyRecs, *idle, *plotDir, *heapprof)
	}
	if *process != "" {
		return runProcesses(stdout, stderr, fakeConfig{records: *records, shards: *shards, size: *size, aggregate: *aggregate, set: set}, *process, strings.Split(*readers, ","), *rounds, *warmup, *heapprof)
	}
	selected, err := selectScenarios(*names)
	if err != nil {
		return fmt.Errorf("-scenarios %q: %w", *names, err)
	}

	f, err := newFake(fakeConfig{records: *records, shards: *shards, size: *size, aggregate: *aggregate, set: set, outputDelay: *outDelay, quotas: *quotas}, selected)
	if err != nil {
		return err
	}
	defer f.close()

	if *cpuprofile != "" {
		out, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	results := map[string][]result{}
	for round := -*warmup; round < *rounds; round++ {
		label := fmt.Sprintf("round %d", round+1)
		if round < 0 {
			label = "warm-up"
		}
		for _, s := range selected {
			r, err := measure(context.Background(), f, s)
			if err != nil {
				return fmt.Errorf("%s, scenario %s: %w", label, s.name, err)
			}
			fmt.Fprintf(stderr, "%-8s %-14s %s\n", label, s.name, r)
			if round >= 0 {
				results[s.name] = append(results[s.name], r)
			}
		}
	}
	return printTable(stdout, f.cfg, *rounds, selected, results)
}
