package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
)

// bigRound is a record of size bytes, plain or a KPL aggregate of user
// records of 1 MiB.
type bigRound struct {
	size int
	agg  bool
}

func (r bigRound) String() string {
	if r.agg {
		return fmt.Sprintf("an aggregate of %d MiB", r.size>>20)
	}
	return fmt.Sprintf("%d MiB", r.size>>20)
}

// largeMemCase is a run of TestLargeRecordsMemoryBounded.
type largeMemCase struct {
	shards int
	// big are the records written to each of the first bigShards shards at
	// once, a round each.
	big       []bigRound
	bigShards int
	// over bounds the peak RSS above memory_limit (0: reported only).
	over int64
	// kill kills the binary with SIGKILL once some large records are out,
	// and starts it again.
	kill bool
}

// TestLargeRecordsMemoryBounded runs the binary with the default
// memory_limit (64 MiB) on a stream that takes records of 10 MiB, by each
// reader, while small records are written to every shard: at 256 shards,
// one record of 10 MiB arrives on each of 8 shards at once, and the
// resident memory must stay within memory_limit + 70 MiB; at 4 shards,
// records of 1 and 5 MiB and KPL aggregates of 10 MiB arrive on every shard
// at once, the binary is killed with SIGKILL once they are out, records of
// 10 MiB come while it is down and it is started again; the peak is
// reported. Every record arrives, byte for byte, and exactly once
// but for those after the checkpoint at the kill.
func TestLargeRecordsMemoryBounded(t *testing.T) {
	t.Parallel()
	bin := memBinary(t)
	const limit = 64 * memMiB
	for _, tc := range []largeMemCase{
		{shards: 256, big: []bigRound{{size: 10 << 20}}, bigShards: 8, over: 70 * memMiB},
		{shards: 4, big: []bigRound{{size: 1 << 20}, {size: 5 << 20}, {size: 10 << 20, agg: true}, {size: 10 << 20}}, bigShards: 4, kill: true},
	} {
		for _, reader := range []string{"efo", "polling"} {
			t.Run(fmt.Sprintf("%d shards %s", tc.shards, reader), func(t *testing.T) {
				largeMemRun(t, bin, tc, reader, limit)
			})
		}
	}
}

// bigOut counts the large records and user records among got.
func bigOut(got []inputtest.Got) int {
	n := 0
	for _, m := range got {
		if strings.HasPrefix(m.Data, "b-") || strings.HasPrefix(m.Data, "a-") {
			n++
		}
	}
	return n
}

// covers tells whether the records of first and then cover want.
func covers(first, then []inputtest.Got, want inputtest.Produced) bool {
	seen := map[string]bool{}
	for _, m := range append(first, then...) {
		if _, ok := want[m.Data]; ok {
			seen[m.Data] = true
		}
	}
	return len(seen) == len(want)
}

func largeMemRun(t *testing.T, bin string, tc largeMemCase, reader string, limit int64) {
	dir := t.TempDir()
	load := startMemLoadWith(t, dir, tc.shards, 512, "-max-record-kib", "10240")
	cpDir := filepath.Join(dir, "cp")
	readerConf := "reader: efo\n    efo: { consumer_name: app }"
	if reader == "polling" {
		readerConf = "reader: polling"
	}
	// start runs the binary, writing to <name>.jsonl, and samples its
	// memory once it reads every shard.
	start := func(name string) (*exec.Cmd, *memSampler, string, string) {
		out, logPath := filepath.Join(dir, name+".jsonl"), filepath.Join(dir, name+".log")
		yaml := fmt.Sprintf(`
http: { enabled: false }
%s    %s
    start_from: trim_horizon
    checkpoint: { dir: %s }
%soutput:
  file: { path: %s, codec: lines }
logger: { level: warn }
`, inputHead(load.endpoint, load.region, load.caFile), readerConf, cpDir, memPipeline, out)
		config := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := run(t, bin, config, logPath)
		if reader == "efo" && name == "first" {
			load.waitSubscribed(logPath)
		}
		return cmd, startMemSampler(t, cmd.Process.Pid, 100*time.Millisecond), out, logPath
	}

	cmd, sampler, out, logPath := start("first")
	time.Sleep(3 * time.Second)
	idle := sampler.maxBetween(time.Time{}, time.Now())
	load.produce(0, 2000)
	began := time.Now()
	rounds := tc.big
	if tc.kill {
		rounds = tc.big[:len(tc.big)-1] // the last comes while the binary is down
	}
	for _, r := range rounds {
		load.big(tc.bigShards, r.size, r.agg)
		time.Sleep(2 * time.Second)
	}
	var first []inputtest.Got
	var atKill checkpoint.Stream
	var peak int64 // of the first run, when killed
	if tc.kill {
		deadline := time.Now().Add(time.Minute)
		want := 0
		for _, r := range rounds {
			want += tc.bigShards
			if r.agg {
				want += tc.bigShards * (r.size>>20 - 1)
			}
		}
		for bigOut(readMemOutput(t, out)) < want {
			if time.Now().After(deadline) {
				t.Fatalf("the large records were not out within a minute; log:\n%s", memLog(logPath))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		sampler.stop()
		peak = sampler.maxBetween(began, time.Now())
		atKill = inputtest.ReadCheckpointsUnlocked(t, cpDir, "arn:aws:kinesis:"+load.region+":000000000000:stream/orders")
		first = readMemOutput(t, out)
		last := tc.big[len(tc.big)-1]
		t.Logf("killed with %d records out, %d of them large (peak RSS %s); records of %v come while it is down",
			len(first), bigOut(first), memFmt(peak), last)
		load.big(tc.bigShards, last.size, last.agg)
		cmd, sampler, out, logPath = start("again")
	}
	want, shas, _ := load.stop()
	deadline := time.Now().Add(2 * time.Minute)
	for !covers(first, readMemOutput(t, out), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records within 2 minutes; log:\n%s", memCountLines(t, out), len(want), memLog(logPath))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(began)
	hwm := max(memProcStatusBytes(t, cmd.Process.Pid, "VmHWM"), peak)
	sampler.stop()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run did not stop cleanly: %v; log:\n%s", err, memLog(logPath))
	}
	got := readMemOutput(t, out)
	if tc.kill {
		// Delivered again after the kill: only what lay after the
		// checkpoint then.
		was := map[string]bool{}
		for _, m := range first {
			was[m.Data] = true
		}
		var again []inputtest.Got
		for _, m := range got {
			if !was[m.Data] {
				again = append(again, m)
			} else if !inputtest.AfterCheckpoint(m, atKill) {
				t.Errorf("record %s (shard %s seq %s) came again after the kill, though the checkpoint then was past it", m.Data, m.Shard, m.Seq)
			}
		}
		got = append(first, again...)
	}
	inputtest.CheckDelivery(t, got, want, true)
	for _, m := range got {
		if m.Err != shas[m.Data] {
			t.Fatalf("record %s arrived with data of length:sha256 %s, want %s", m.Data, m.Err, shas[m.Data])
		}
	}
	bigs := bigOut(got)
	t.Logf("%d shards by %s, memory_limit %s: idle RSS %s; records of %v on %d shards at once (%d large records and user records) among %d small ones: peak RSS %s, memory_limit + %s; all read in %v",
		tc.shards, reader, memFmt(limit), memFmt(idle), tc.big, tc.bigShards, bigs, len(want)-bigs,
		memFmt(hwm), memFmt(hwm-limit), took.Round(time.Millisecond))
	if tc.over > 0 && hwm > limit+tc.over {
		t.Errorf("peak RSS %s (VmHWM) exceeds memory_limit + %s = %s", memFmt(hwm), memFmt(tc.over), memFmt(limit+tc.over))
	}
}
