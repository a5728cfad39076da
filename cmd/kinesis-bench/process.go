package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"
)

// A process run drains the stream with the benthos-kinesis binary as a
// separate process, as users run it: its peak resident memory (sampled
// from /proc every 10 ms, and the kernel's high-water mark) is what the
// bench of the in-process scenarios cannot show, since there the fake's
// records share the heap.
type processResult struct {
	reader   string
	wall     time.Duration // start of the process to the last record written
	cpu      time.Duration // the process's user and system time, to its exit
	idleRSS  int64         // bytes resident once started, before reading (an empty stream)
	peakRSS  int64         // most bytes resident while draining
	kernelHW int64         // VmHWM at the end: the kernel's peak
	records  int
	spread   float64 // the largest ratio of a shard's lag to the median's (see progress)
	repeats  int     // records output more than once
	missing  int     // records not output
}

func (r processResult) String() string {
	return fmt.Sprintf("%s: %d records in %v (%.0f/s), peak RSS %.1f MiB (kernel %.1f MiB), idle %.1f MiB, CPU %v, lag spread %.2f, %d repeated, %d missing",
		r.reader, r.records, r.wall.Round(time.Millisecond), float64(r.records)/r.wall.Seconds(),
		mib(r.peakRSS), mib(r.kernelHW), mib(r.idleRSS), r.cpu.Round(time.Millisecond), r.spread, r.repeats, r.missing)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// runProcess drains stream with the binary at bin, reading by reader.
// With heapProfile set, the binary serves its debug endpoints and the heap
// profile taken nearest its peak resident memory is written there, and a
// CPU profile of the first 2 s of its drain beside it (suffixed .cpu).
func runProcess(ctx context.Context, f *fake, bin, reader, stream, heapProfile string) (processResult, error) {
	r := processResult{reader: reader}
	dir, err := os.MkdirTemp("", "kinesis-bench-process-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "out.jsonl")
	fields := readerFields(reader)
	if reader == "polling" {
		fields = append(fields, setting{"polling.interval", "200ms"}, setting{"polling.limit", getRecordsLimit})
	}
	httpConf := map[string]any{"enabled": false}
	var debugAddr string
	if heapProfile != "" {
		if debugAddr, err = freeAddr(); err != nil {
			return r, err
		}
		httpConf = map[string]any{"enabled": true, "address": debugAddr, "debug_endpoints": true}
	}
	config, err := binaryConfig(f, stream, dir, fields, httpConf, map[string]any{"file": map[string]any{"path": out, "codec": "lines"}})
	if err != nil {
		return r, err
	}
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "run", config)
	if env := os.Getenv("KINESIS_BENCH_CHILD_ENV"); env != "" {
		cmd.Env = append(os.Environ(), strings.Fields(env)...)
	}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer cmd.Process.Kill()
	if heapProfile != "" {
		// A CPU profile of the drain's first seconds, beside the heap's.
		cpu := make(chan struct{})
		defer func() { <-cpu }()
		go func() {
			defer close(cpu)
			time.Sleep(300 * time.Millisecond) // the process's start
			if prof, err := fetch("http://" + debugAddr + "/debug/pprof/profile?seconds=2"); err == nil {
				os.WriteFile(heapProfile+".cpu", prof, 0o644)
			}
		}()
	}

	want := int64(f.cfg.records) * int64(f.cfg.size+1) // a line per record
	deadline := start.Add(runTimeout)
	var lastProfile time.Time
	prog := newProgress(f)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		<-tick.C
		if i%10 == 0 {
			prog.read(out)
		}
		rss := procStatus(cmd.Process.Pid, "VmRSS")
		if r.idleRSS == 0 && rss > 0 {
			r.idleRSS = rss
		}
		if rss > r.peakRSS && heapProfile != "" && time.Since(lastProfile) > 200*time.Millisecond {
			lastProfile = time.Now()
			if prof, err := fetch("http://" + debugAddr + "/debug/pprof/heap"); err == nil {
				os.WriteFile(heapProfile, prof, 0o644)
			}
			if stats, err := fetch("http://" + debugAddr + "/debug/pprof/heap?debug=1"); err == nil {
				os.WriteFile(heapProfile+".txt", stats, 0o644)
			}
		}
		r.peakRSS = max(r.peakRSS, rss)
		info, err := os.Stat(out)
		if err == nil && info.Size() >= want {
			r.wall = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the binary wrote %d of %d bytes within %v; its log:\n%s", size(info), want, runTimeout, logs.String())
		}
		if cmd.ProcessState != nil {
			return r, fmt.Errorf("the binary exited; its log:\n%s", logs.String())
		}
	}
	defer func() {
		// KINESIS_BENCH_CHILD_LOG=path keeps the binary's log (e.g. with
		// GODEBUG=gctrace=1 in the environment).
		if path := os.Getenv("KINESIS_BENCH_CHILD_LOG"); path != "" {
			os.WriteFile(path, logs.Bytes(), 0o644)
		}
	}()
	r.kernelHW = procStatus(cmd.Process.Pid, "VmHWM")
	r.records = f.cfg.records
	prog.read(out)
	r.spread, r.repeats, r.missing = prog.spread, prog.repeats, prog.missing()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		return r, fmt.Errorf("the binary did not stop cleanly: %v; its log:\n%s", err, logs.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return r, nil
}

// fetchClient bounds each fetch from a child (its profiles, its metrics):
// a hung child fails the fetch instead of stalling the bench. A CPU
// profile takes its seconds plus this.
var fetchClient = &http.Client{Timeout: 30 * time.Second}

func fetch(url string) ([]byte, error) {
	resp, err := fetchClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func size(info os.FileInfo) int64 {
	if info == nil {
		return 0
	}
	return info.Size()
}

// procStatus reads a size field (in kB) of /proc/<pid>/status, in bytes; 0
// when it cannot be read.
func procStatus(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// printProcess prints the medians of the process runs.
func printProcess(w io.Writer, cfg fakeConfig, rounds int, results map[string][]processResult) error {
	fmt.Fprintf(w, "the benthos-kinesis binary as a process draining %d records of %d bytes over %d shards to a file; %d rounds, medians\n\n",
		cfg.records, cfg.size, cfg.shards, rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reader\trecords/s\tpeak RSS MiB\tkernel peak MiB\tfirst RSS MiB\tCPU µs/rec\tlag spread\trepeated\tmissing\t")
	for _, reader := range []string{"polling", "efo"} {
		rs := results[reader]
		if len(rs) == 0 {
			continue
		}
		med := func(fn func(processResult) float64) float64 { return median(rs, fn) }
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.0f\t%.0f\t\n", reader,
			med(func(r processResult) float64 { return float64(r.records) / r.wall.Seconds() }),
			med(func(r processResult) float64 { return mib(r.peakRSS) }),
			med(func(r processResult) float64 { return mib(r.kernelHW) }),
			med(func(r processResult) float64 { return mib(r.idleRSS) }),
			med(func(r processResult) float64 { return float64(r.cpu.Microseconds()) / float64(r.records) }),
			slices.Max(collect(rs, func(r processResult) float64 { return r.spread })),
			slices.Max(collect(rs, func(r processResult) float64 { return float64(r.repeats) })),
			slices.Max(collect(rs, func(r processResult) float64 { return float64(r.missing) })))
	}
	return tw.Flush()
}

// runProcesses is the -process mode: rounds of the binary draining the
// plain stream by each reader, after warm-up rounds that are not reported.
func runProcesses(stdout, stderr io.Writer, cfg fakeConfig, bin string, readers []string, rounds, warmup int, heapProfile string) error {
	for _, r := range readers {
		if r != "polling" && r != "efo" {
			return fmt.Errorf("-readers: %q is neither polling nor efo", r)
		}
	}
	f, err := newFake(cfg, []scenario{{stream: streamPlain}})
	if err != nil {
		return err
	}
	defer f.close()
	results := map[string][]processResult{}
	for round := -warmup; round < rounds; round++ {
		for _, reader := range readers {
			prof := ""
			if heapProfile != "" {
				prof = heapProfile + "." + reader
			}
			r, err := runProcess(context.Background(), f, bin, reader, streamPlain, prof)
			if err != nil {
				return fmt.Errorf("%s: %w", reader, err)
			}
			fmt.Fprintf(stderr, "round %d %s\n", round+1, r)
			if round >= 0 {
				results[reader] = append(results[reader], r)
			}
		}
	}
	return printProcess(stdout, cfg, rounds, results)
}

// readerFields are the input's fields that choose reader, and the fake's
// consumer for fan-out.
func readerFields(reader string) settings {
	fields := settings{{"reader", reader}}
	if reader == "efo" {
		fields = append(fields, setting{"efo.consumer_name", consumer})
	}
	return fields
}

// binaryConfig writes, into dir, the binary's config reading stream of f
// with fields, its http section and output, and returns its path.
func binaryConfig(f *fake, stream, dir string, fields settings, httpConf, output map[string]any) (string, error) {
	in, err := inputYAML(f, stream, filepath.Join(dir, "checkpoints"), fields)
	if err != nil {
		return "", err
	}
	var input map[string]any
	if err := yaml.Unmarshal([]byte(in), &input); err != nil {
		return "", err
	}
	doc, err := yaml.Marshal(map[string]any{"http": httpConf, "input": input, "output": output, "logger": map[string]any{"level": "warn"}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, doc, 0o644)
}
