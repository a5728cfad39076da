package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// The -fleet mode: what the Grafana dashboard of config/deploy shows of a
// fleet, from a real run. Three processes of the binary share two streams
// of the fake Kinesis (AWS's quotas on) through a lease table in dynalite:
// two start on a backlog while records keep coming, the third joins
// (leases move to it), the first is stopped with SIGTERM (it hands its
// leases over). Each instance's /metrics is scraped every second, and the
// dashboard's main panels are drawn from the scrapes: lag per stream,
// records read per second per instance, owned shards per instance, lease
// moves by cause. At the end it prints what the lease table took: the
// DynamoDB calls and units a second, counted at a proxy in front of
// dynalite, and their monthly cost on demand per shard and per instance.

// fleetStream is a stream of the fleet run: its shards, the backlog it holds
// at the start and the records written to it each second from then on.
type fleetStream struct {
	name            string
	shards, backlog int
	rate            int
}

var fleetStreams = []fleetStream{
	{name: "orders", shards: 8, backlog: 40_000, rate: 1_800},
	{name: "clicks", shards: 4, backlog: 10_000, rate: 600},
}

const (
	fleetInstances = 3
	// fleetPace is the records a second each instance's pipeline takes (a
	// rate_limit processor standing for its output): two instances drain
	// the backlog, three drain it faster, and two keep up with the rate.
	fleetPace = 2_000
	// fleetReadAhead is checkpoint.limit: the records read and not yet
	// acknowledged, per shard.
	fleetReadAhead   = 500
	fleetLeasePeriod = 3 * time.Second
	fleetTable       = "bench-fleet"
	// fleetRateWindow is the window of the records/s figure, as Grafana's
	// rate() over its rate interval.
	fleetRateWindow = 3
)

// fleetInstance is one process of the fleet and what its scrapes saw.
type fleetInstance struct {
	id, addr string
	cmd      *exec.Cmd
	logs     bytes.Buffer
	exited   chan struct{}
	stopping bool // the run sent it SIGTERM
	scrapes  []fleetScrape
}

// fleetScrape is what one scrape of an instance's /metrics found.
type fleetScrape struct {
	at      float64            // seconds since the fleet's start
	lag     map[string]float64 // kinesis_stream_millis_behind_latest by stream
	read    float64            // kinesis_records_read, every stream and shard
	owned   float64            // kinesis_owned_shards, every stream
	moves   map[string]float64 // kinesis_lease_moves by cause, every stream
	stopped bool               // no answer: the process is gone
}

func runFleet(stdout, stderr io.Writer, bin string, duration time.Duration, plotDir string) error {
	opts := []kinesisfake.Opt{kinesisfake.TLS(), kinesisfake.Quotas(true)}
	for _, s := range fleetStreams {
		opts = append(opts, kinesisfake.Stream(s.name, s.shards))
	}
	srv, err := kinesisfake.New(opts...)
	if err != nil {
		return err
	}
	defer srv.Close()
	for _, s := range fleetStreams {
		if err := fleetPut(srv, s, s.backlog/s.shards); err != nil {
			return fmt.Errorf("loading the backlog of %s: %w", s.name, err)
		}
	}
	ddb, stopDynalite, err := startDynalite()
	if err != nil {
		return err
	}
	defer stopDynalite()
	dir, err := os.MkdirTemp("", "kinesis-bench-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	instances := make([]*fleetInstance, fleetInstances)
	for i := range instances {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		instances[i] = &fleetInstance{id: fmt.Sprintf("p%d", i), addr: addr, exited: make(chan struct{})}
	}
	defer func() { // after a failure: leave nothing running
		for _, in := range instances {
			if in.cmd != nil {
				in.cmd.Process.Kill()
				<-in.exited
			}
		}
	}()
	calls0, units0 := ddb.Calls()
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	joinAt, stopAt := duration/6, duration*2/3
	marks := []mark{{joinAt.Seconds(), "p2 starts"}, {stopAt.Seconds(), "p0 stopped (SIGTERM)"}}
	for _, in := range instances[:2] {
		if err := in.start(bin, dir, srv, ddb.Endpoint); err != nil {
			return err
		}
	}
	stopProducing := fleetProduce(srv)
	defer stopProducing()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < duration {
		<-tick.C
		if in := instances[2]; in.cmd == nil && time.Since(start) >= joinAt {
			if err := in.start(bin, dir, srv, ddb.Endpoint); err != nil {
				return err
			}
		}
		if in := instances[0]; !in.stopping && time.Since(start) >= stopAt {
			in.stop()
		}
		for _, in := range instances {
			if in.cmd != nil {
				in.scrape(since())
			}
		}
		for _, in := range instances {
			if in.exitedEarly() {
				return fmt.Errorf("instance %s exited: %v; its log:\n%s", in.id, in.cmd.ProcessState, in.logs.String())
			}
		}
	}
	calls1, units1 := ddb.Calls()
	ran := time.Since(start)
	for _, in := range instances {
		if !in.stopping {
			in.stop()
		}
	}
	for _, in := range instances {
		select {
		case <-in.exited:
		case <-time.After(30 * time.Second):
			in.cmd.Process.Kill()
			<-in.exited // its log is whole
			return fmt.Errorf("instance %s did not stop within 30 s of SIGTERM; its log:\n%s", in.id, in.logs.String())
		}
		if !in.cmd.ProcessState.Success() {
			return fmt.Errorf("instance %s did not stop cleanly: %v; its log:\n%s", in.id, in.cmd.ProcessState, in.logs.String())
		}
	}

	panels := fleetPanels(instances)
	printFleet(stdout, instances, panels, marks)
	printFleetDynamoDB(stdout, emulator.RatesBetween(calls0, units0, calls1, units1, ran), instances)
	if plotDir == "" {
		return nil
	}
	var shards []string
	for _, s := range fleetStreams {
		shards = append(shards, fmt.Sprintf("%s (%d shards)", s.name, s.shards))
	}
	title := fmt.Sprintf("benthos-kinesis fleet: %d instances reading %s through a lease table, each scraped every second",
		fleetInstances, strings.Join(shards, " and "))
	path := filepath.Join(plotDir, "dashboard.png")
	if err := plotPanels(path, title, 2, duration.Seconds(), panels, marks); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", path)
	return nil
}

// start runs the instance: every stream from TRIM_HORIZON by polling, its
// leases in the table at ddb, the pipeline taking fleetPace records a
// second into a drop output.
func (in *fleetInstance) start(bin, dir string, srv *kinesisfake.Server, ddb string) error {
	var names []string
	for _, s := range fleetStreams {
		names = append(names, s.name)
	}
	conf := map[string]any{
		"http": map[string]any{"address": in.addr},
		"input": map[string]any{"aws_kinesis_streams": map[string]any{
			"streams":     names,
			"endpoint":    srv.Endpoint(),
			"region":      srv.Region(),
			"credentials": map[string]any{"id": "fake", "secret": "fake"},
			"tls":         map[string]any{"enabled": true, "root_cas": string(srv.CertificatePEM())},
			// Small reads, and few records read ahead of the pipeline, so
			// that the lag Kinesis reports follows the pipeline: a read of
			// a whole backlog would be 0 behind at once.
			"reader":     "polling",
			"polling":    map[string]any{"limit": fleetReadAhead / 2},
			"start_from": "trim_horizon",
			"checkpoint": map[string]any{"limit": fleetReadAhead, "commit_period": "1s", "dynamodb": map[string]any{
				"table": fleetTable, "create": true, "endpoint": ddb,
				"lease_period": fleetLeasePeriod.String(), "instance_id": in.id,
			}},
		}},
		"rate_limit_resources": []any{map[string]any{"label": "output_pace", "local": map[string]any{"count": fleetPace / 10, "interval": "100ms"}}},
		"pipeline":             map[string]any{"processors": []any{map[string]any{"rate_limit": map[string]any{"resource": "output_pace"}}}},
		"output":               map[string]any{"drop": map[string]any{}},
		"logger":               map[string]any{"level": "warn"},
	}
	doc, err := yaml.Marshal(conf)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, in.id+".yaml")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		return err
	}
	in.cmd = exec.Command(bin, "run", path)
	in.cmd.Stdout, in.cmd.Stderr = &in.logs, &in.logs
	if err := in.cmd.Start(); err != nil {
		return fmt.Errorf("starting instance %s: %w", in.id, err)
	}
	go func() {
		in.cmd.Wait()
		close(in.exited)
	}()
	return nil
}

// stop sends the instance SIGTERM: it hands its leases over and exits.
func (in *fleetInstance) stop() {
	in.stopping = true
	in.cmd.Process.Signal(syscall.SIGTERM)
}

// exitedEarly reports an exit the run did not ask for.
func (in *fleetInstance) exitedEarly() bool {
	if in.cmd == nil || in.stopping {
		return false
	}
	select {
	case <-in.exited:
		return true
	default:
		return false
	}
}

var (
	streamLabel = regexp.MustCompile(`[{,]stream="([^"]*)"`)
	causeLabel  = regexp.MustCompile(`[{,]cause="([^"]*)"`)
)

// scrape takes in the instance's /metrics at seconds since the start.
func (in *fleetInstance) scrape(at float64) {
	s := fleetScrape{at: at, lag: map[string]float64{}, moves: map[string]float64{}}
	body, err := fetch("http://" + in.addr + "/metrics")
	if err != nil {
		s.stopped = true
		in.scrapes = append(in.scrapes, s)
		return
	}
	for _, line := range strings.Split(string(body), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		switch name {
		case "kinesis_stream_millis_behind_latest":
			if m := streamLabel.FindStringSubmatch("{" + rest); m != nil {
				s.lag[m[1]] = v
			}
		case "kinesis_records_read":
			s.read += v
		case "kinesis_owned_shards":
			s.owned += v
		case "kinesis_lease_moves":
			if m := causeLabel.FindStringSubmatch("{" + rest); m != nil {
				s.moves[m[1]] += v
			}
		}
	}
	in.scrapes = append(in.scrapes, s)
}

// fleetPanels turns the scrapes into the dashboard's main panels. The
// times are the seconds of the scrape rounds (the instances are scraped one
// after the other within a round).
func fleetPanels(instances []*fleetInstance) []timePanel {
	var times []float64
	for _, in := range instances {
		for _, s := range in.scrapes {
			times = append(times, math.Round(s.at))
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	at := func(in *fleetInstance, t float64) (fleetScrape, int, bool) {
		for i, s := range in.scrapes {
			if math.Round(s.at) == t {
				return s, i, !s.stopped
			}
		}
		return fleetScrape{}, -1, false
	}
	nan := math.NaN()

	lag := timePanel{title: "Lag per stream (s): the most behind shard, over every instance"}
	for _, st := range fleetStreams {
		ts := timeSeries{name: st.name, ts: times}
		for _, t := range times {
			v, any := 0.0, false
			for _, in := range instances {
				if s, _, ok := at(in, t); ok {
					if l, ok := s.lag[st.name]; ok {
						v, any = math.Max(v, l/1000), true
					}
				}
			}
			ts.vs = append(ts.vs, cond(any, v, nan))
		}
		lag.ss = append(lag.ss, ts)
	}

	rate := timePanel{title: fmt.Sprintf("Records read /s per instance (over %d s)", fleetRateWindow)}
	owned := timePanel{title: "Owned shards per instance, stacked", stacked: true}
	for _, in := range instances {
		r, o := timeSeries{name: in.id, ts: times}, timeSeries{name: in.id, ts: times}
		for _, t := range times {
			s, i, ok := at(in, t)
			o.vs = append(o.vs, cond(ok, s.owned, nan))
			v := nan
			if ok && i >= fleetRateWindow && !in.scrapes[i-fleetRateWindow].stopped {
				before := in.scrapes[i-fleetRateWindow]
				v = (s.read - before.read) / (s.at - before.at)
			}
			r.vs = append(r.vs, v)
		}
		rate.ss, owned.ss = append(rate.ss, r), append(owned.ss, o)
	}

	// Lease moves so far over the fleet: a stopped instance's count stays
	// as it last was.
	moves := timePanel{title: "Lease moves so far by cause, over every instance"}
	causes := map[string]bool{}
	for _, in := range instances {
		for _, s := range in.scrapes {
			for c := range s.moves {
				causes[c] = true
			}
		}
	}
	for _, c := range slices.Sorted(maps.Keys(causes)) {
		ts := timeSeries{name: c, ts: times}
		for _, t := range times {
			total := 0.0
			for _, in := range instances {
				last := 0.0
				for _, s := range in.scrapes {
					if math.Round(s.at) > t {
						break
					}
					if !s.stopped {
						last = s.moves[c]
					}
				}
				total += last
			}
			ts.vs = append(ts.vs, total)
		}
		moves.ss = append(moves.ss, ts)
	}
	return []timePanel{lag, rate, owned, moves}
}

// printFleet prints, at each event and at the end, each panel's values.
func printFleet(w io.Writer, instances []*fleetInstance, panels []timePanel, marks []mark) {
	fmt.Fprintf(w, "the benthos-kinesis binary, %d processes sharing streams through a lease table (lease_period %v), each pipeline taking %d records/s\n", len(instances), fleetLeasePeriod, fleetPace)
	for _, s := range fleetStreams {
		fmt.Fprintf(w, "stream %s: %d shards, %d records of backlog, %d records/s written\n", s.name, s.shards, s.backlog, s.rate)
	}
	for _, m := range marks {
		fmt.Fprintf(w, "%.0f s: %s\n", m.at, m.label)
	}
	if len(panels) == 0 || len(panels[0].ss) == 0 {
		return
	}
	times := panels[0].ss[0].ts
	for _, p := range panels {
		fmt.Fprintf(w, "\n%s\n", p.title)
		for _, s := range p.ss {
			var vals []string
			for i := 0; i < len(times); i += 5 {
				vals = append(vals, fmt.Sprintf("%.0fs=%s", times[i], fleetValue(s.vs[i])))
			}
			fmt.Fprintf(w, "  %-8s %s\n", s.name, strings.Join(vals, " "))
		}
	}
}

func fleetValue(v float64) string {
	if math.IsNaN(v) {
		return "-" // not running
	}
	return fmt.Sprintf("%.4g", v)
}

// fleetProduce writes each stream's rate, spread over its shards, every
// 100 ms, until the returned function is called.
func fleetProduce(srv *kinesisfake.Server) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, s := range fleetStreams {
				if fleetPut(srv, s, s.rate/10/s.shards) != nil {
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// fleetPut writes n records of 200 bytes to each shard of the stream.
func fleetPut(srv *kinesisfake.Server, s fleetStream, n int) error {
	shards, err := srv.Shards(s.name)
	if err != nil {
		return err
	}
	data := bytes.Repeat([]byte("x"), 200)
	for _, sh := range shards {
		if err := srv.PutToShard(s.name, *sh.ShardId, n, func(int) []byte { return data }); err != nil {
			return err
		}
	}
	return nil
}

func cond[T any](ok bool, a, b T) T {
	if ok {
		return a
	}
	return b
}
