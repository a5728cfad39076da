package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// The -latency mode: records are put at a fixed rate, each carrying the
// time it was put, while the input reads them through a Benthos pipeline;
// the output takes the time each arrives. The delay is from the put's
// return to the record reaching the output.
//
// The fake serves a record to GetRecords as soon as it is stored and pushes
// it to subscribers at once, with AWS's read quotas on: AWS's own
// propagation delay (its documentation gives about 70 ms for fan-out, and up
// to a second or more for GetRecords) is not modelled.

type latencyResult struct {
	reader  string
	delays  []time.Duration // sorted
	missing int
}

func (r latencyResult) pct(p float64) time.Duration {
	if len(r.delays) == 0 {
		return 0
	}
	i := min(int(p*float64(len(r.delays))), len(r.delays)-1)
	return r.delays[i]
}

// runLatency measures each reader for d after a warm-up, at rate records
// per second spread over the shards.
func runLatency(stdout, stderr io.Writer, cfg fakeConfig, readers []string, rate int, d time.Duration, plotDir string) error {
	var results []latencyResult
	for _, reader := range readers {
		r, err := measureLatency(cfg, reader, rate, d)
		if err != nil {
			return fmt.Errorf("%s: %w", reader, err)
		}
		fmt.Fprintf(stderr, "%s: %d records, p50 %v, p99 %v, p99.9 %v\n", reader, len(r.delays), r.pct(0.5), r.pct(0.99), r.pct(0.999))
		results = append(results, r)
	}
	fmt.Fprintf(stdout, "latency from PutRecord to the output, %d records/s over %d shards for %v per reader, the input's defaults (polling interval 200ms); AWS propagation not modelled\n\n", rate, cfg.shards, d)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reader\trecords\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1e3, 'f', 1, 64) }
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.reader, len(r.delays), ms(r.pct(0.5)), ms(r.pct(0.9)), ms(r.pct(0.99)), ms(r.pct(0.999)), ms(r.delays[len(r.delays)-1]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if plotDir == "" {
		return nil
	}
	var ss []series
	for _, r := range results {
		s := series{name: r.reader}
		for _, p := range []float64{0.5, 0.9, 0.99, 0.999} {
			s.values = append(s.values, float64(r.pct(p).Microseconds())/1e3)
		}
		ss = append(ss, s)
	}
	return plotBarsLog(filepath.Join(plotDir, "latency.png"), fmt.Sprintf("Delay from PutRecord to the output, %d records/s over %d shards", rate, cfg.shards), "ms", []string{"p50", "p90", "p99", "p99.9"}, ss)
}

func measureLatency(cfg fakeConfig, reader string, rate int, d time.Duration) (latencyResult, error) {
	res := latencyResult{reader: reader}
	const stream = "latency"
	f, err := quotaFake(cfg, stream)
	if err != nil {
		return res, err
	}
	defer f.close()
	srv := f.srv
	dir, err := os.MkdirTemp("", "kinesis-bench-latency-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	fields := readerFields(reader)
	conf, err := inputYAML(f, stream, dir, fields)
	if err != nil {
		return res, err
	}
	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := sb.AddInputYAML(conf); err != nil {
		return res, err
	}
	var mu sync.Mutex
	var measuring bool
	seen := map[int64]bool{}
	first := make(chan struct{})
	var firstOnce sync.Once
	err = sb.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range batch {
			b, err := m.AsBytes()
			if err != nil {
				return err
			}
			ns, err := strconv.ParseInt(string(b), 10, 64)
			if err != nil {
				return fmt.Errorf("record %q carries no time", b)
			}
			firstOnce.Do(func() { close(first) })
			if measuring && ns > 0 && !seen[ns] {
				seen[ns] = true
				res.delays = append(res.delays, now.Sub(time.Unix(0, ns)))
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	pipeline, err := sb.Build()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- pipeline.Run(ctx) }()
	defer func() {
		pipeline.StopWithin(30 * time.Second)
		<-ran
	}()

	// Until the input reads: one record a shard's worth of keys, untimed.
	put := func(ns int64, i int) error {
		_, _, err := srv.Put(stream, "key-"+strconv.Itoa(i%64), strconv.AppendInt(nil, ns, 10))
		return err
	}
	deadline := time.After(time.Minute)
	for ready := false; !ready; {
		if err := put(-1, 0); err != nil {
			return res, err
		}
		select {
		case <-first:
			ready = true
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			return res, fmt.Errorf("the input read nothing within a minute")
		case err := <-ran:
			return res, fmt.Errorf("the pipeline stopped: %v", err)
		}
	}

	// A second of warm-up, then d measured, at rate records per second:
	// every millisecond, the records due by then.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var sent []int64
	for i := 0; time.Since(start) < time.Second+d; {
		<-tick.C
		if !measuring && time.Since(start) >= time.Second {
			mu.Lock()
			measuring = true
			mu.Unlock()
		}
		for due := int(time.Since(start).Seconds() * float64(rate)); i < due; i++ {
			ns := time.Now().UnixNano()
			if err := put(ns, i); err != nil {
				return res, err
			}
			if measuring {
				sent = append(sent, ns)
			}
		}
	}
	// Every measured record must arrive.
	for wait := time.Now(); ; {
		mu.Lock()
		missing := 0
		for _, ns := range sent {
			if !seen[ns] {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Since(wait) > 30*time.Second {
			res.missing = missing
			return res, fmt.Errorf("%d of %d records never arrived", missing, len(sent))
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(res.delays)
	return res, nil
}
