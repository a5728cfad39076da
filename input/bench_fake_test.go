//go:build unix

package input

// Benchmarks of the whole input, a Benthos pipeline around it, against a bare
// aws-sdk-go-v2 read loop over the same in-process fake Kinesis, measured in
// the same run.
//
// Every benchmark reads benchRecords records of benchSize bytes, preloaded in
// benchShards shards, from the start of the stream, and fails unless it read
// exactly that many records and bytes. Each iteration of an input benchmark
// also runs its baseline once, untimed, right before it, and reports the
// ratios of the two (interleaving keeps the comparison fair on a machine
// whose load changes during the run):
//
//   - speed-vs-base: the input's records/s over the baseline's (1 = as fast);
//   - cpu-vs-base: the input's CPU time per record over the baseline's (1 = as
//     cheap), from getrusage, all threads of the process.
//
// What makes the ratios meaningful:
//
//   - Both sides read the same records from the same fake over TLS and
//     HTTP/2, with the fake's quotas off, so only the code under test sets the
//     pace.
//   - Polling: the input never calls GetRecords on a shard more often than
//     every 200 ms (polling.MinInterval, the Kinesis quota of 5 calls/s), so
//     the baseline keeps the same gap, and both ask for 10,000 records a call,
//     the maximum. 50,000 records a shard then take 5 calls, at least 0.8 s
//     whatever the code: speed-vs-base says whether the input keeps up with
//     that gate, cpu-vs-base says what reading costs it.
//   - Fan-out: nothing gates a subscription but the reader, so speed-vs-base
//     is the throughput ratio.
//   - Aggregated: the baseline is the input reading the same number of user
//     records, plain, by fan-out (BenchmarkInputEFO's work).
//   - The fake runs in this process: its CPU and allocations are on both sides
//     of every ratio, which pulls the ratios towards 1. The goroutines of the
//     two sides carry the pprof label side=input or side=sdk (the fake's
//     none), so a CPU profile separates them: go tool pprof -tagfocus
//     side=input.
//   - The input runs with its defaults (checkpoint.limit 1024, commit_period
//     1s, deaggregate on, no batching policy), a fresh checkpoint directory
//     each iteration, and Benthos metrics off (the stream builder's default).
//
// Timing: an iteration's clock runs from starting the stream (Connect
// included) to the output's acknowledgement of the last record; building the
// stream and stopping it are not timed. first-ms is the time to the first
// record. Run them with few, long iterations, e.g.
//
//	nice go test -run '^$' -bench 'Baseline|Input' -benchtime 3x -count 3 ./input
//
// and -args -kinesis.baseline=false to profile an input benchmark without its
// interleaved baseline.

import (
	"context"
	"flag"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/bench"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

const (
	benchRecords  = 200_000
	benchShards   = 4
	benchSize     = 200
	benchPerShard = benchRecords / benchShards
	// benchUsersPerAggregate user records make one KPL aggregate of about
	// 21 KB, spread over benchKeysPerShard partition keys of its shard.
	benchUsersPerAggregate = 100
	benchKeysPerShard      = 16
	benchGetRecordsLimit   = 10000
	benchConsumer          = "bench"
	benchTimeout           = 3 * time.Minute
)

var benchBaseline = flag.Bool("kinesis.baseline", true,
	"run each input benchmark's baseline once per iteration, untimed, and report the ratios; false to profile the input alone")

// benchFake is the fake Kinesis of one benchmark: TLS with HTTP/2 as AWS
// serves fan-out, quotas off, and no 5-second takeover window so that every
// iteration may subscribe again at once. Stream "plain" holds benchRecords
// plain records; stream "kpl" the same user records in KPL aggregates, loaded
// only when asked for.
type benchFake struct {
	srv       *kinesisfake.Server
	consumers map[string]string
}

const (
	benchPlain = "plain"
	benchKPL   = "kpl"
)

func newBenchFake(b *testing.B, streams ...string) *benchFake {
	b.Helper()
	opts := []kinesisfake.Opt{kinesisfake.TLS(), kinesisfake.Quotas(false), kinesisfake.SubscribeTakeoverWindow(0)}
	for _, s := range streams {
		opts = append(opts, kinesisfake.Stream(s, benchShards))
	}
	srv, err := kinesisfake.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	f := &benchFake{srv: srv, consumers: map[string]string{}}
	for _, s := range streams {
		switch s {
		case benchPlain:
			f.loadPlain(b, s)
		case benchKPL:
			f.loadAggregated(b, s)
		}
		arn, err := srv.RegisterConsumer(s, benchConsumer)
		if err != nil {
			b.Fatal(err)
		}
		f.consumers[s] = arn
	}
	return f
}

func (f *benchFake) shards(b *testing.B, stream string) []types.Shard {
	b.Helper()
	shards, err := f.srv.Shards(stream)
	if err != nil {
		b.Fatal(err)
	}
	return shards
}

// benchData returns record n's data: its index, then filler.
func benchData(buf []byte, n int) []byte {
	d := buf[n*benchSize : (n+1)*benchSize : (n+1)*benchSize]
	copy(d, strconv.AppendInt(make([]byte, 0, 12), int64(n), 10))
	return d
}

func (f *benchFake) loadPlain(b *testing.B, stream string) {
	b.Helper()
	buf := make([]byte, benchRecords*benchSize)
	for s, sh := range f.shards(b, stream) {
		err := f.srv.PutToShard(stream, *sh.ShardId, benchPerShard, func(i int) []byte {
			return benchData(buf, s*benchPerShard+i)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// loadAggregated writes the same user records as loadPlain, packed as the
// KPL does: every user record's partition key hashes into the shard of its
// aggregate, so the input keeps them all.
func (f *benchFake) loadAggregated(b *testing.B, stream string) {
	b.Helper()
	buf := make([]byte, benchRecords*benchSize)
	for s, sh := range f.shards(b, stream) {
		keys := benchKeysOf(b, sh)
		var aggs [][]byte
		for first := 0; first < benchPerShard; first += benchUsersPerAggregate {
			users := make([]kpl.UserRecord, min(benchUsersPerAggregate, benchPerShard-first))
			for i := range users {
				n := s*benchPerShard + first + i
				users[i] = kpl.UserRecord{PartitionKey: keys[n%len(keys)], Data: benchData(buf, n)}
			}
			agg, err := kpl.Pack(users)
			if err != nil {
				b.Fatal(err)
			}
			aggs = append(aggs, agg.Data)
		}
		if err := f.srv.PutToShard(stream, *sh.ShardId, len(aggs), func(i int) []byte { return aggs[i] }); err != nil {
			b.Fatal(err)
		}
	}
}

// benchKeysOf finds partition keys that hash into the shard.
func benchKeysOf(b *testing.B, sh types.Shard) []string {
	b.Helper()
	r, err := kpl.ParseHashKeyRange(*sh.HashKeyRange.StartingHashKey, *sh.HashKeyRange.EndingHashKey)
	if err != nil {
		b.Fatal(err)
	}
	var keys []string
	for i := 0; len(keys) < benchKeysPerShard; i++ {
		if pk := "user-" + strconv.Itoa(i); r.Contains(kpl.PartitionHashKey(pk)) {
			keys = append(keys, pk)
		}
	}
	return keys
}

// benchRead is what one read of a whole stream took.
type benchRead struct {
	wall, cpu, first time.Duration
}

// benchClock times one read: wall time, process CPU time, time to the first
// record; with timed, the benchmark timer runs only while it does.
type benchClock struct {
	b     *testing.B
	timed bool
	start time.Time
	cpu0  time.Duration
	first atomic.Int64 // ns from start to the first record; 0 before it
}

func startClock(b *testing.B, timed bool) *benchClock {
	if timed {
		b.StartTimer()
	}
	return &benchClock{b: b, timed: timed, start: time.Now(), cpu0: processCPU()}
}

func (c *benchClock) seen() {
	if c.first.Load() == 0 {
		c.first.CompareAndSwap(0, int64(time.Since(c.start))+1)
	}
}

func (c *benchClock) stop() benchRead {
	r := benchRead{wall: time.Since(c.start), cpu: processCPU() - c.cpu0, first: time.Duration(c.first.Load())}
	if c.timed {
		c.b.StopTimer()
	}
	return r
}

// processCPU is the user and system CPU time of every thread of the process
// so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchTotals adds up the reads of one side of a benchmark.
type benchTotals struct {
	reads            int
	wall, cpu, first time.Duration
}

func (t *benchTotals) add(r benchRead) {
	t.reads++
	t.wall += r.wall
	t.cpu += r.cpu
	t.first += r.first
}

func (t *benchTotals) rate() float64 { return float64(t.reads*benchRecords) / t.wall.Seconds() }

func (t *benchTotals) cpuPerRecord() float64 {
	return float64(t.cpu.Nanoseconds()) / float64(t.reads*benchRecords)
}

// benchScenario reads the whole stream once and checks it read every record
// exactly once; with timed, the benchmark timer runs during the read.
type benchScenario func(b *testing.B, timed bool) benchRead

// runBench runs scenario b.N times, each after one untimed run of base (when
// base is set and -kinesis.baseline is on), and reports both.
func runBench(b *testing.B, scenario, base benchScenario) {
	b.ReportAllocs()
	b.SetBytes(benchRecords * benchSize)
	var got, ref benchTotals
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		if base != nil && *benchBaseline {
			ref.add(base(b, false))
		}
		got.add(scenario(b, true))
	}
	b.ReportMetric(got.rate(), "records/s")
	b.ReportMetric(got.cpuPerRecord(), "cpu-ns/rec")
	b.ReportMetric(float64(got.first.Microseconds())/1000/float64(got.reads), "first-ms")
	if ref.reads > 0 {
		b.ReportMetric(got.rate()/ref.rate(), "speed-vs-base")
		b.ReportMetric(got.cpuPerRecord()/ref.cpuPerRecord(), "cpu-vs-base")
	}
}

// BenchmarkBaselineSDKPolling is the polling baseline: GetShardIterator, then
// GetRecords (10,000 records a call) every 200 ms per shard, one goroutine per
// shard, with the SDK's default client.
func BenchmarkBaselineSDKPolling(b *testing.B) {
	f := newBenchFake(b, benchPlain)
	runBench(b, f.sdkPolling, nil)
}

// BenchmarkInputPolling reads the same records through the input, reader
// polling, in a Benthos pipeline.
func BenchmarkInputPolling(b *testing.B) {
	f := newBenchFake(b, benchPlain)
	runBench(b, f.inputPolling, f.sdkPolling)
}

// BenchmarkBaselineSDKEFO is the fan-out baseline: one SubscribeToShard per
// shard, its events read in a goroutine per shard.
func BenchmarkBaselineSDKEFO(b *testing.B) {
	f := newBenchFake(b, benchPlain)
	runBench(b, f.sdkEFO, nil)
}

// BenchmarkInputEFO reads the same records through the input, reader efo.
func BenchmarkInputEFO(b *testing.B) {
	f := newBenchFake(b, benchPlain)
	runBench(b, f.inputEFO, f.sdkEFO)
}

// BenchmarkInputEFOAggregated reads the same user records, packed in KPL
// aggregates of 100, through the input by fan-out with deaggregate on; its
// baseline is BenchmarkInputEFO's read of them plain.
func BenchmarkInputEFOAggregated(b *testing.B) {
	f := newBenchFake(b, benchPlain, benchKPL)
	runBench(b, f.inputEFOAggregated, f.inputEFO)
}

func (f *benchFake) sdkPolling(b *testing.B, timed bool) benchRead {
	return f.sdk(b, timed, benchPlain, f.pollShard)
}

func (f *benchFake) sdkEFO(b *testing.B, timed bool) benchRead {
	return f.sdk(b, timed, benchPlain, f.subscribeShard)
}

// benchShardReader reads one shard until it has read want records, calling
// seen with the records of every response.
type benchShardReader func(ctx context.Context, client *kinesis.Client, stream, shardID string, want int, seen func([]types.Record)) error

// sdk reads every shard of stream with read, one goroutine per shard, and
// checks the counts. Every read gets a new client with the SDK's defaults:
// like the input, which builds its client at Connect, it pays for its
// connection, and its transport's goroutines carry its profile label.
func (f *benchFake) sdk(b *testing.B, timed bool, stream string, read benchShardReader) benchRead {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	shards := f.shards(b, stream)
	var records, bytes atomic.Int64
	errs := make([]error, len(shards))
	clock := startClock(b, timed)
	var client *kinesis.Client
	pprof.Do(ctx, pprof.Labels("side", "sdk"), func(ctx context.Context) {
		client = f.srv.NewClient()
		var wg sync.WaitGroup
		for i, sh := range shards {
			wg.Go(func() {
				errs[i] = read(ctx, client, stream, *sh.ShardId, benchPerShard, func(recs []types.Record) {
					n := 0
					for j := range recs {
						n += len(recs[j].Data)
					}
					clock.seen()
					records.Add(int64(len(recs)))
					bytes.Add(int64(n))
				})
			})
		}
		wg.Wait()
	})
	r := clock.stop()
	if c, ok := client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	benchCheck(b, records.Load(), bytes.Load())
	return r
}

func benchCheck(b *testing.B, records, bytes int64) {
	b.Helper()
	if records != benchRecords || bytes != benchRecords*benchSize {
		b.Fatalf("read %d records of %d bytes in all, want exactly %d of %d", records, bytes, benchRecords, benchRecords*benchSize)
	}
}

// pollShard reads a shard as the polling publisher does: the same gap
// between the starts of two GetRecords calls, the same limit.
func (f *benchFake) pollShard(ctx context.Context, client *kinesis.Client, stream, shardID string, want int, seen func([]types.Record)) error {
	return bench.PollFromStart(ctx, client, f.srv.StreamARN(stream), shardID, benchGetRecordsLimit, polling.MinInterval, want, seen)
}

// subscribeShard reads a shard with one subscription, the bare SDK way.
func (f *benchFake) subscribeShard(ctx context.Context, client *kinesis.Client, stream, shardID string, want int, seen func([]types.Record)) error {
	return bench.SubscribeFromStart(ctx, client, f.consumers[stream], shardID, want, seen)
}

func (f *benchFake) inputPolling(b *testing.B, timed bool) benchRead {
	return f.input(b, timed, benchPlain, "reader: polling\npolling: { interval: 200ms }")
}

func (f *benchFake) inputEFO(b *testing.B, timed bool) benchRead {
	return f.input(b, timed, benchPlain, "reader: efo\nefo: { consumer_name: "+benchConsumer+" }")
}

func (f *benchFake) inputEFOAggregated(b *testing.B, timed bool) benchRead {
	return f.input(b, timed, benchKPL, "reader: efo\nefo: { consumer_name: "+benchConsumer+" }\ndeaggregate: true")
}

// input reads stream through the input in a Benthos pipeline whose output
// counts and acknowledges every batch, then stops the pipeline and checks
// that nothing more arrived.
func (f *benchFake) input(b *testing.B, timed bool, stream, extra string) benchRead {
	b.Helper()
	var records, bytes atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	var clock *benchClock
	sb := service.NewStreamBuilder()
	if err := sb.SetLoggerYAML("level: warn"); err != nil {
		b.Fatal(err)
	}
	if err := sb.AddInputYAML("aws_kinesis_streams:\n" + inputtest.Indent(benchInputYAML(f.srv, stream, b.TempDir(), extra), "  ")); err != nil {
		b.Fatal(err)
	}
	err := sb.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		n := 0
		for _, m := range batch {
			data, err := m.AsBytes()
			if err != nil {
				return err
			}
			n += len(data)
		}
		clock.seen()
		bytes.Add(int64(n))
		if records.Add(int64(len(batch))) >= benchRecords {
			once.Do(func() { close(done) })
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	pipeline, err := sb.Build()
	if err != nil {
		b.Fatal(err)
	}
	ran := make(chan error, 1)
	clock = startClock(b, timed)
	go pprof.Do(context.Background(), pprof.Labels("side", "input"), func(ctx context.Context) {
		ran <- pipeline.Run(ctx)
	})
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("the pipeline stopped after %d records: %v", records.Load(), err)
	case <-time.After(benchTimeout):
		b.Fatalf("only %d of %d records within %v", records.Load(), benchRecords, benchTimeout)
	}
	r := clock.stop()
	if err := pipeline.StopWithin(30 * time.Second); err != nil {
		b.Fatalf("stopping the pipeline: %v", err)
	}
	<-ran
	benchCheck(b, records.Load(), bytes.Load())
	return r
}

// benchInputYAML configures the input for the fake: its defaults, except
// what reaching the fake needs, a fresh checkpoint directory and
// trim_horizon. (The tests' fakeInput commits every 100 ms; a benchmark
// measures the default.)
func benchInputYAML(srv *kinesisfake.Server, stream, dir, extra string) string {
	return fakeYAML(srv, stream, fmt.Sprintf("{ dir: '%s' }", dir), extra)
}
