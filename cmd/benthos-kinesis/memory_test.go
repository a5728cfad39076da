package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
)

// The load of TestSlowOutputMemoryBounded.
const (
	memShards     = 4
	memRecordSize = 1 << 10
	// memProduceRate is the records per second written, spread evenly over
	// the shards: 750 KiB/s per shard, under the 2 MiB/s a fan-out consumer
	// gets per shard, so the fake never holds records back.
	memProduceRate = 3000
	// memOutputRate is what the slow output takes: a rate_limit resource
	// with local: {count: 100, interval: 100ms}, applied by the output's
	// processors to every message. Benthos has no buffer unless one is
	// configured, so this throttles the whole pipeline back to the input.
	memOutputRate = 1000
	// memSlowFor is how long the binary runs with the slow output while
	// records are produced.
	memSlowFor = 36 * time.Second
	// memBacklogAtStart is the backlog written at once before the slow
	// binary starts: 9,000 records (8.8 MiB) per shard, more than the whole
	// chain of one shard holds (about 7 MiB of records: the stream window and
	// five events, see memPerShard), so that every event the binary is sent
	// is a full one, and stays full since production outpaces the output.
	// Subscribed to empty shards instead, the binary is first sent many tiny
	// events (a put or two each) and a shard's chain holds tiny events for
	// minutes: memory then stays well under the bound and climbs late in the
	// run as shards switch to full events.
	memBacklogAtStart = 9000 * memShards
)

// What the bound is built from (see memPerShard). The factors were checked
// against heap profiles of the binary in this test.
const (
	memMiB = 1 << 20
	// memStreamWindow is the HTTP/2 receive window of one subscription
	// (input/aws.go streamWindow): what the transport buffers unread.
	memStreamWindow = 1 * memMiB
	// memEvent is the most record bytes in one SubscribeToShard event (the
	// fake's MaxEventBytes default, 1 MiB: 1,015 records of 1 KiB here).
	memEvent = 1 * memMiB
	// memCheckpointLimit is checkpoint.limit, the default: at most this many
	// unacknowledged records per shard, or one event if it holds more.
	memCheckpointLimit = 1024
	// memWireFactor: an event on the wire is JSON with base64 record data
	// (4/3) plus per-record fields.
	memWireFactor = 1.4
	// memDecodedFactor: a decoded record's 1 KiB of data sits in a 1,152-byte
	// allocation (base64 decoding), next to the SDK's Record with its
	// sequence number and partition key.
	memDecodedFactor = 1.4
	// memMetaFactor: a Benthos message adds 7 metadata entries per record.
	memMetaFactor = 0.75
	// memMappedFactor: this test's mapping makes an object of 6 fields and
	// its JSON line per record.
	memMappedFactor = 2.0
	// memGCFactor: with GOGC=100 the Go heap grows to twice what is live
	// before it is collected.
	memGCFactor = 2.0
	// memSlack covers goroutine stacks, allocator fragmentation and the
	// scavenger returning freed pages late.
	memSlack = 16 * memMiB
	// memTrendSlack is how far RSS over the last third of the slow run may
	// exceed RSS over its second third (the first is the ramp up, slower on
	// a loaded machine). A backlog kept in memory would grow by (production -
	// output) x record size = 2 MiB/s, 24 MiB from the end of the one window
	// to the end of the other, twice that with the decoded and GC factors.
	memTrendSlack = 20 * memMiB
)

// memPerShard is the most memory the reading of one shard holds while the
// output is the bottleneck, following the chain from the socket to the
// output; each stage holds at most one event:
//
//   - the HTTP/2 transport: unread bytes up to the stream window;
//   - the SDK's event stream decoder: one frame being decoded (wire size);
//   - two decoded events parked in the SDK (smithy's reader goroutine and
//     the kinesis package's pipe goroutine, each blocked on an unbuffered
//     channel);
//   - one decoded event in the efo publisher, blocked handing it to the
//     shard reader (an unbuffered channel: input/read/shardreader.go);
//   - one event converted to messages in the shard reader, blocked in the
//     ack tracker (input/read/acks.go) until acknowledgements make room;
//   - checkpoint.limit records in flight in the pipeline, as messages and
//     as the mapping's output (or one event, if larger than the limit).
func memPerShard() float64 {
	inFlight := max(float64(memCheckpointLimit*memRecordSize), memEvent)
	return memStreamWindow +
		memWireFactor*memEvent +
		memDecodedFactor*(4*memEvent+inFlight) +
		memMetaFactor*(memEvent+inFlight) +
		memMappedFactor*inFlight
}

// memBound bounds the resident memory of the binary while its output is
// slower than production: the idle pipeline's RSS plus, for every shard,
// memPerShard doubled for the GC, plus slack. It depends neither on how long
// the output has been slow nor on the backlog.
func memBound(idle int64) int64 {
	return idle + int64(memGCFactor*memShards*memPerShard()) + memSlack
}

// TestSlowOutputMemoryBounded runs the real binary reading 4 shards by
// fan-out over HTTP/2 (TLS, as AWS serves it) for 36 s while its output
// takes 1,000 records/s and 3,000 records/s of 1 KiB are produced (the
// binary starts with a backlog of 36,000 records written before it). Its
// resident memory, sampled every 500 ms, stays under memBound: the idle RSS
// (the same binary and config subscribed to the empty shards, measured first
// in the same run) plus 2 x 4 x memPerShard (12.9 MiB) + 16 MiB = idle +
// 119 MiB, whatever the backlog. The backlog at the end is about 108,000
// records (105 MiB); kept in memory, decoded, it would take at least idle +
// 147 MiB, about twice that in RSS. The RSS of the last 12 s must also stay
// within memTrendSlack of seconds 12-24. Checked: with an unbounded queue in
// the binary (buffer: {memory: {}} added to the slow config) RSS reached
// 613 MiB in a 60 s run of an earlier version of this test and 360 MiB in this
// one, and both checks failed.
//
// Then the binary is stopped with SIGTERM and started again without the slow
// output: every record arrives exactly once (both stops are clean), in order
// per shard and per partition key, with its data intact.
//
// The pipeline runs one processing thread: with more, Benthos processes
// batches in parallel and the output can write them out of order.
//
// The fake Kinesis and the producer run in a process of their own
// (testdata/memload, built without the race detector), as the binary does:
// in this race-instrumented process they cost about 38 CPU-seconds.
func TestSlowOutputMemoryBounded(t *testing.T) {
	t.Parallel()
	bin := memBinary(t)
	dir := t.TempDir()
	load := startMemLoad(t, dir)
	cpDir := filepath.Join(dir, "checkpoints")
	config := func(name string, slow bool) (yamlPath, outPath string) {
		outPath = filepath.Join(dir, name+".jsonl")
		yamlPath = filepath.Join(dir, name+".yaml")
		outputProcs := ""
		if slow {
			outputProcs = "  processors:\n    - rate_limit: { resource: slow_output }\n"
		}
		yaml := fmt.Sprintf(`
http: { enabled: false }
%s    reader: efo
    efo: { consumer_name: app }
    start_from: trim_horizon
    checkpoint: { dir: %s, limit: %d }
%soutput:
%s  file: { path: %s, codec: lines }
rate_limit_resources:
  - label: slow_output
    local: { count: %d, interval: 100ms }
logger: { level: warn }
`, inputHead(load.endpoint, load.region, load.caFile), cpDir, memCheckpointLimit, memPipeline, outputProcs, outPath, memOutputRate/10)
		if err := os.WriteFile(yamlPath, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return yamlPath, outPath
	}
	stop := func(cmd *exec.Cmd, what, logPath string) time.Duration {
		t.Helper()
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the %s run did not stop cleanly on SIGTERM: %v; log:\n%s", what, err, memLog(logPath))
		}
		return time.Since(start)
	}

	// The idle pipeline: subscribed to every shard, nothing to read.
	cfgSlow, outIdle := config("idle", true)
	logIdle := filepath.Join(dir, "idle.log")
	idleCmd := run(t, bin, cfgSlow, logIdle)
	load.waitSubscribed(logIdle)
	idleSampler := startMemSampler(t, idleCmd.Process.Pid, 500*time.Millisecond)
	time.Sleep(3 * time.Second)
	idleSampler.stop()
	idle := idleSampler.maxBetween(time.Time{}, time.Now())
	stop(idleCmd, "idle", logIdle)
	if n := memCountLines(t, outIdle); n != 0 {
		t.Fatalf("the idle run wrote %d records", n)
	}
	bound := memBound(idle)
	t.Logf("idle RSS (subscribed to %d shards, nothing produced): %s; bound %s = idle + %.0f x %d shards x %s + %s",
		memShards, memFmt(idle), memFmt(bound), memGCFactor, memShards, memFmt(int64(memPerShard())), memFmt(memSlack))

	// Production, with the slow binary started on a backlog.
	load.produce(memBacklogAtStart, memProduceRate)
	cfgSlow, outSlow := config("slow", true)
	logSlow := filepath.Join(dir, "slow.log")
	slowCmd := run(t, bin, cfgSlow, logSlow)
	pid := slowCmd.Process.Pid
	slowStart := time.Now()
	sampler := startMemSampler(t, pid, 500*time.Millisecond)
	for next := memSlowFor / 3; next <= memSlowFor; next += memSlowFor / 3 {
		time.Sleep(time.Until(slowStart.Add(next)))
		t.Logf("%3.0fs: RSS %s, %d records written", next.Seconds(), memFmt(sampler.last()), memCountLines(t, outSlow))
	}
	want, shas, producedFor := load.stop()
	slowEnd := time.Now()
	hwm := memProcStatusBytes(t, pid, "VmHWM")
	sampler.stop()
	written := memCountLines(t, outSlow)
	peak := sampler.maxBetween(slowStart, slowEnd)
	third := memSlowFor / 3
	mid := sampler.maxBetween(slowStart.Add(third), slowStart.Add(2*third))
	late := sampler.maxBetween(slowEnd.Add(-third), slowEnd)
	backlog := len(want) - written
	t.Logf("produced %d records (%s): %d before the slow binary started, the rest in %v while it ran; it wrote %d (%.0f/s); backlog %d records (%s)",
		len(want), memFmt(int64(len(want))*memRecordSize), memBacklogAtStart, producedFor.Round(time.Millisecond),
		written, float64(written)/slowEnd.Sub(slowStart).Seconds(), backlog, memFmt(int64(backlog)*memRecordSize))
	t.Logf("RSS: idle %s; slow run peak %s (VmHWM %s), max over the second third %s, over the last third %s; bound %s; the backlog decoded in memory would be at least %s",
		memFmt(idle), memFmt(peak), memFmt(hwm), memFmt(mid), memFmt(late), memFmt(bound),
		memFmt(idle+int64(memDecodedFactor*float64(backlog*memRecordSize))))

	if written > len(want)/2 {
		t.Fatalf("the output kept up (%d of %d records written): nothing was slow", written, len(want))
	}
	if floor := int(memOutputRate * memSlowFor.Seconds() / 2); written < floor {
		t.Fatalf("only %d records written in %v, expected about %d: the pipeline stalled; log:\n%s",
			written, memSlowFor, int(memOutputRate*memSlowFor.Seconds()), memLog(logSlow))
	}
	if hwm > bound {
		t.Errorf("peak RSS %s (VmHWM) exceeds the bound %s (idle %s): memory grew with the backlog of %d records",
			memFmt(hwm), memFmt(bound), memFmt(idle), backlog)
	}
	if late > mid+memTrendSlack {
		t.Errorf("RSS trends upward: max over the last third of the run %s, over the second third %s (slack %s)",
			memFmt(late), memFmt(mid), memFmt(memTrendSlack))
	}

	took := stop(slowCmd, "slow", logSlow)
	got1 := readMemOutput(t, outSlow)
	t.Logf("the slow run stopped in %v with %d records written", took.Round(time.Millisecond), len(got1))
	memCheckFullBatches(t, got1)

	// The same pipeline without the slow output drains the backlog from the
	// checkpoints.
	cfgDrain, outDrain := config("drain", false)
	logDrain := filepath.Join(dir, "drain.log")
	drainStart := time.Now()
	drainCmd := run(t, bin, cfgDrain, logDrain)
	deadline := time.Now().Add(5 * time.Minute) // a bound, not a measure: about 20 s unloaded
	for n := len(got1) + memCountLines(t, outDrain); n < len(want); n = len(got1) + memCountLines(t, outDrain) {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart only %d of %d records arrived within 5 minutes; log:\n%s", n, len(want), memLog(logDrain))
		}
		time.Sleep(200 * time.Millisecond)
	}
	drained := time.Since(drainStart)
	time.Sleep(500 * time.Millisecond) // let duplicates, if any, arrive
	stop(drainCmd, "drain", logDrain)
	got2 := readMemOutput(t, outDrain)
	t.Logf("the drain run wrote %d records in %v", len(got2), drained.Round(time.Millisecond))

	all := append(append([]inputtest.Got(nil), got1...), got2...)
	inputtest.CheckDelivery(t, all, want, true)
	inputtest.CheckOrder(t, got1)
	inputtest.CheckOrder(t, got2)
	for _, m := range all {
		if m.Err != shas[m.Data] {
			t.Fatalf("record %s (shard %s seq %s) arrived with data of length:sha256 %s, want %s", m.Data, m.Shard, m.Seq, m.Err, shas[m.Data])
		}
	}
	t.Logf("all %d records arrived exactly once with intact data (%d in the slow run, %d after the restart)",
		len(want), len(got1), len(got2))
}

// memBinary builds the binary for a test of its resident memory, which
// is skipped with -short (it runs the binary for a minute) and off Linux
// (it reads /proc).
func memBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary for about a minute")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the resident memory of the binary from /proc")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// memPipeline is the pipeline of the memory tests: each record as a JSON
// line of its id (the data up to a bar), length and SHA-256, shard,
// sequence number and partition key (readMemOutput reads it).
const memPipeline = `pipeline:
  threads: 1
  processors:
    - mapping: |
        root.id = content().slice(0, 16).string().re_replace_all("[|].*$", "")
        root.len = content().length()
        root.sha = content().hash("sha256").encode("hex")
        root.shard = @kinesis_shard
        root.seq = @kinesis_sequence_number
        root.pk = @kinesis_partition_key
`

// memCheckFullBatches checks that the slow run exercised the worst case the
// bound is about: every shard was read in full events (about 1,000 records
// each), not in tiny ones. An event becomes one Benthos batch, or two when
// it is split to fit the room left under checkpoint.limit, so runs average
// at least a quarter of an event. With one pipeline thread a batch is a run
// of consecutive lines of one shard.
func memCheckFullBatches(t *testing.T, got []inputtest.Got) {
	t.Helper()
	runs, records := map[string]int{}, map[string]int{}
	for i, m := range got {
		records[m.Shard]++
		if i == 0 || got[i-1].Shard != m.Shard {
			runs[m.Shard]++
		}
	}
	var parts []string
	for shard, n := range records {
		mean := n / runs[shard]
		parts = append(parts, fmt.Sprintf("%s: %d records in %d batches", strings.TrimPrefix(shard, "shardId-"), n, runs[shard]))
		if mean < memEvent/memRecordSize/4 {
			t.Errorf("shard %s was read in batches of %d records on average: not the full events the bound is about", shard, mean)
		}
	}
	if len(records) != memShards {
		t.Errorf("the slow run read %d shards, want %d", len(records), memShards)
	}
	t.Logf("slow run, per shard: %s", strings.Join(parts, "; "))
}

// readMemOutput parses the JSON lines a run wrote. Got.Data is the record's
// id and Got.Err "<len>:<sha256>" of its data.
func readMemOutput(t *testing.T, path string) []inputtest.Got {
	t.Helper()
	var out []inputtest.Got
	readJSONLines(t, path, func(m struct {
		ID, Sha, Shard, Seq, PK string
		Len                     int
	}) {
		out = append(out, inputtest.Got{Stream: "orders", Shard: m.Shard, Seq: m.Seq, PK: m.PK, Data: m.ID,
			Err: strconv.Itoa(m.Len) + ":" + m.Sha})
	})
	return out
}

func memLog(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// memSampler reads the VmRSS of a process at a fixed interval.
type memSampler struct {
	pid      int
	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	samples []memSample
}

type memSample struct {
	at  time.Time
	rss int64 // bytes
}

func startMemSampler(t *testing.T, pid int, every time.Duration) *memSampler {
	s := &memSampler{pid: pid, done: make(chan struct{})}
	s.take()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
				s.take()
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *memSampler) take() {
	rss, err := memProcStatus(s.pid, "VmRSS")
	if err != nil {
		return // the process is gone; the test notices
	}
	s.mu.Lock()
	s.samples = append(s.samples, memSample{at: time.Now(), rss: rss})
	s.mu.Unlock()
}

func (s *memSampler) stop() {
	s.stopOnce.Do(func() { close(s.done) })
	s.wg.Wait()
}

func (s *memSampler) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return 0
	}
	return s.samples[len(s.samples)-1].rss
}

// maxBetween is the highest sample taken in [from, to].
func (s *memSampler) maxBetween(from, to time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m int64
	for _, x := range s.samples {
		if !x.at.Before(from) && !x.at.After(to) {
			m = max(m, x.rss)
		}
	}
	return m
}

// procStatus returns a size field (kB) of /proc/<pid>/status in bytes.
func memProcStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status %s: %q: %v", pid, field, rest, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

func memProcStatusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	v, err := memProcStatus(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func memFmt(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/memMiB) }
