package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// The -idle mode: the binary, as a process, reads an empty stream of many
// shards from the fake with AWS's quotas on (control plane and reads), for
// a while after every shard is being read. It reports how long it took
// until every shard was read, and then the process's resident memory, CPU
// and goroutines.

type idleResult struct {
	reader     string
	shards     int
	allReading time.Duration // start of the process to every shard read
	rss        int64
	cpu        time.Duration // during the idle window
	window     time.Duration
	goroutines int
	// wake is how long a record written at the end of the idle window took
	// to be read (the input's received count moved).
	wake time.Duration
}

// defaultBusyPerShard is the backlog per shard the busy runs drain unless
// -busy-records says otherwise.
const defaultBusyPerShard = 400

// runIdle runs the -idle mode: for each shard count and reader, the binary
// idle on an empty stream, then draining busyPerShard records a shard.
func runIdle(stdout, stderr io.Writer, cfg fakeConfig, bin string, readers []string, shardCounts []int, busyPerShard int, window time.Duration, plotDir, profile string) error {
	var results []idleResult
	busy := map[string][]processResult{}
	for _, n := range shardCounts {
		for _, reader := range readers {
			c := cfg
			c.shards = n
			prof := ""
			if profile != "" {
				prof = fmt.Sprintf("%s.%s.%d", profile, reader, n)
			}
			r, err := measureIdle(c, bin, reader, window, prof)
			if err != nil {
				return fmt.Errorf("%s, %d shards: %w", reader, n, err)
			}
			fmt.Fprintf(stderr, "%s %d shards: all read after %v, RSS %.1f MiB, CPU %v in %v, %d goroutines, a record after the idle spell read in %v\n",
				reader, n, r.allReading.Round(time.Millisecond), mib(r.rss), r.cpu.Round(time.Millisecond), window, r.goroutines, r.wake.Round(time.Millisecond))
			results = append(results, r)

			c.records, c.size = n*busyPerShard, 200
			f, err := newFake(c, []scenario{{stream: streamPlain}})
			if err != nil {
				return err
			}
			b, err := runProcess(context.Background(), f, bin, reader, streamPlain, "")
			f.close()
			if err != nil {
				return fmt.Errorf("%s, %d shards busy: %w", reader, n, err)
			}
			fmt.Fprintf(stderr, "%s %d shards busy: %s\n", reader, n, b)
			busy[reader] = append(busy[reader], b)
		}
	}
	if plotDir != "" {
		if err := plotShards(plotDir, readers, shardCounts, results, busy); err != nil {
			return err
		}
	}
	defer printBusy(stdout, readers, shardCounts, busyPerShard, results, busy)
	fmt.Fprintf(stdout, "the benthos-kinesis binary as a process reading empty streams, fake with AWS's quotas on; figures after %v idle with every shard read\n\n", window)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reader\tshards\tall read after s\tRSS MiB\tRSS KiB/shard\tCPU %\tgoroutines\tgoroutines/shard\twake ms\t")
	for _, r := range results {
		perShard := float64(r.rss) / 1024 / float64(r.shards)
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f\t%.1f\t%d\t%.2f\t%.0f\t\n", r.reader, r.shards, r.allReading.Seconds(), mib(r.rss), perShard,
			100*r.cpu.Seconds()/r.window.Seconds(), r.goroutines, float64(r.goroutines)/float64(r.shards), float64(r.wake.Microseconds())/1000)
	}
	return tw.Flush()
}

// measureIdle runs the binary on an idle stream of cfg.shards shards. With
// a profile path, it writes there, at the end of the idle window, the
// binary's heap profile and memory statistics (.txt), its goroutines
// (.goroutines) and its memory map (.smaps).
func measureIdle(cfg fakeConfig, bin, reader string, window time.Duration, profile string) (idleResult, error) {
	res := idleResult{reader: reader, shards: cfg.shards, window: window}
	const stream = "idle"
	f, err := quotaFake(cfg, stream)
	if err != nil {
		return res, err
	}
	defer f.close()
	dir, err := os.MkdirTemp("", "kinesis-bench-idle-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return res, err
	}
	config, err := binaryConfig(f, stream, dir, readerFields(reader), map[string]any{"enabled": true, "address": addr, "debug_endpoints": profile != ""}, map[string]any{"drop": map[string]any{}})
	if err != nil {
		return res, err
	}
	var logs bytes.Buffer
	cmd := exec.CommandContext(context.Background(), bin, "run", config)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	deadline := start.Add(5 * time.Minute)
	for {
		time.Sleep(100 * time.Millisecond)
		if n := shardsRead("http://" + addr + "/metrics"); n >= cfg.shards {
			res.allReading = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("not every shard read within 5 minutes; the binary's log:\n%s", logs.String())
		}
		if cmd.ProcessState != nil {
			return res, fmt.Errorf("the binary exited; its log:\n%s", logs.String())
		}
	}
	cpu0 := procCPU(cmd.Process.Pid)
	time.Sleep(window)
	res.cpu = procCPU(cmd.Process.Pid) - cpu0
	res.rss = procStatus(cmd.Process.Pid, "VmRSS")
	res.goroutines = int(metricSum("http://"+addr+"/metrics", "go_goroutines"))
	if profile != "" {
		for suffix, path := range map[string]string{"": "heap", ".txt": "heap?debug=1", ".goroutines": "goroutine?debug=1"} {
			if body, err := fetch("http://" + addr + "/debug/pprof/" + path); err == nil {
				os.WriteFile(profile+suffix, body, 0o644)
			}
		}
		if smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", cmd.Process.Pid)); err == nil {
			os.WriteFile(profile+".smaps", smaps, 0o644)
		}
	}
	if res.wake, err = wakeLatency(f, stream, "http://"+addr+"/metrics"); err != nil {
		return res, err
	}
	return res, nil
}

// wakeLatency writes one record to the idle stream and returns how long it
// took until the input counted it received (metrics scraped every 5 ms).
func wakeLatency(f *fake, stream, url string) (time.Duration, error) {
	before := metricSum(url, "input_received")
	put := time.Now()
	if _, _, err := f.srv.Put(stream, "wake", []byte("after an idle spell")); err != nil {
		return 0, err
	}
	for time.Since(put) < 30*time.Second {
		if metricSum(url, "input_received") > before {
			return time.Since(put), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("a record written after the idle spell was not read within 30 s")
}

// shardsRead counts the shards with a kinesis_millis_behind_latest series:
// each has had a read (a GetRecords answer, or a subscription's event).
func shardsRead(url string) int {
	body, err := fetch(url)
	if err != nil {
		return 0
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "kinesis_millis_behind_latest{") {
			n++
		}
	}
	return n
}

// metricSum is the sum of a metric's series, whatever their labels.
func metricSum(url, name string) float64 {
	body, err := fetch(url)
	if err != nil {
		return 0
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			f, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += f
		}
	}
	return sum
}

// procCPU is the user and system time of a process so far.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// printBusy prints the busy runs, each with what its peak adds to the
// resident memory of the same binary, reader and shard count idle.
func printBusy(w io.Writer, readers []string, shardCounts []int, busyPerShard int, idle []idleResult, busy map[string][]processResult) {
	fmt.Fprintf(w, "\nthe same binary draining %d records of 200 bytes per shard (quotas off); over idle: peak RSS less the idle RSS above\n\n", busyPerShard)
	idleRSS := map[string]int64{}
	for _, r := range idle {
		idleRSS[fmt.Sprint(r.reader, r.shards)] = r.rss
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reader\tshards\trecords/s\tpeak RSS MiB\tover idle MiB\tCPU µs/rec\tlag spread\trepeated\tmissing\t")
	for i, n := range shardCounts {
		for _, reader := range readers {
			r := busy[reader][i]
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%d\t%d\t\n", reader, n, float64(r.records)/r.wall.Seconds(), mib(r.peakRSS),
				mib(r.peakRSS-idleRSS[fmt.Sprint(reader, n)]), float64(r.cpu.Microseconds())/float64(r.records), r.spread, r.repeats, r.missing)
		}
	}
	tw.Flush()
}

// plotShards draws RSS, idle and busy, and records/s against shard count.
func plotShards(dir string, readers []string, shardCounts []int, idle []idleResult, busy map[string][]processResult) error {
	xs := make([]float64, len(shardCounts))
	for i, n := range shardCounts {
		xs[i] = float64(n)
	}
	var rss, rate []series
	for _, reader := range readers {
		s := series{name: reader + " idle"}
		for _, r := range idle {
			if r.reader == reader {
				s.values = append(s.values, mib(r.rss))
			}
		}
		b := series{name: reader + " busy"}
		rs := series{name: reader}
		for _, r := range busy[reader] {
			b.values = append(b.values, mib(r.peakRSS))
			rs.values = append(rs.values, float64(r.records)/r.wall.Seconds())
		}
		rss, rate = append(rss, s, b), append(rate, rs)
	}
	if err := plotLines(filepath.Join(dir, "rss-vs-shards.png"), "benthos-kinesis resident memory: idle, and peak draining 400 records per shard", "shards", "MiB", xs, rss); err != nil {
		return err
	}
	return plotLines(filepath.Join(dir, "rate-vs-shards.png"), "Records/s draining 400 records of 200 B per shard", "shards", "records/s", xs, rate)
}
