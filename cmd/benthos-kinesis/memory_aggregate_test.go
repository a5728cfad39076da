package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// The load of TestCraftedAggregatesMemoryBounded: what the issue measured.
const (
	craftedAggregates = 5
	// craftedRSSBound is the most resident memory a run may reach (VmHWM).
	// The binary idles at about 40 MiB; reading plain records of 1 MiB
	// takes about 43 MB.
	craftedRSSBound = 100 * memMiB
	// craftedStallAt is where the first run's pipeline stalls, to be killed
	// with its checkpoint inside an aggregate: user record 100,000 of
	// aggregate 2 (counted from 0), half way through the stream.
	craftedStallAggregate, craftedStallSub = 2, 100_000
)

// TestCraftedAggregatesMemoryBounded puts five aggregated records of 1 MB on
// a one-shard stream, each holding 166,650 empty user records (all anyone
// who can write to the stream needs), and reads them with the real binary,
// by polling and by fan-out. The first run's pipeline stalls in the middle
// of the third aggregate and is killed with SIGKILL once its checkpoint
// (inside that aggregate) is committed; a second run reads on. Each run's
// peak RSS (VmHWM) stays under 100 MiB, every user record arrives, the
// second run resumes right after the checkpoint at the kill (so none is
// repeated that the checkpoint said was done), and each run delivers in
// order.
//
// Before the fix an aggregate was converted whole, a message of about 1 KiB
// per user record: one such record took 223 MB of RSS, five 430 MB
// (polling) and 395 MB (fan-out), whatever checkpoint.limit said.
func TestCraftedAggregatesMemoryBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("reads 833,250 user records twice through the binary")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the resident memory of the binary from /proc")
	}
	for _, reader := range []string{"polling", "efo"} {
		t.Run(reader, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			readCraftedAggregates(t, reader)
			t.Logf("%s: took %v", reader, time.Since(start).Round(time.Millisecond))
		})
	}
}

// craftedLine is a user record as the pipeline of readCraftedAggregates
// writes it: "<sequence number> <sub-sequence number> <data length>".
type craftedLine struct {
	agg, sub int // the aggregate's index in write order, and the user record's
	length   int
}

func readCraftedAggregates(t *testing.T, reader string) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A short hand-over window: the restart's subscription is refused while
	// the killed run's is held (up to 5 s on AWS); the test is about where
	// the restart resumes, not that wait.
	srv, ca := startFake(t, dir, kinesisfake.Stream("orders", 1), kinesisfake.Quotas(false),
		kinesisfake.SubscribeTakeoverWindow(time.Second))
	client := srv.NewClient()
	agg := inputtest.CraftedAggregate(t, inputtest.CraftedUserRecords)
	if size := len(agg.Data) + len(agg.PartitionKey); size > 1<<20 {
		t.Fatalf("the crafted aggregate takes %d bytes, over the Kinesis record limit", size)
	}
	seqs := make([]string, craftedAggregates)
	for i := range seqs {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := client.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("orders"),
			PartitionKey: aws.String(agg.PartitionKey), Data: agg.Data})
		cancel()
		if err != nil {
			t.Fatalf("putting crafted aggregate %d: %v", i, err)
		}
		seqs[i] = aws.ToString(res.SequenceNumber)
	}
	arn := srv.StreamARN("orders")
	cpDir := filepath.Join(dir, "checkpoints")
	readerYAML := "reader: polling\n    polling: { interval: 200ms }"
	if reader == "efo" {
		readerYAML = "reader: efo\n    efo: { consumer_name: app }"
	}
	config := func(name, processors string) (yamlPath, outPath string) {
		outPath = filepath.Join(dir, name+".txt")
		yamlPath = filepath.Join(dir, name+".yaml")
		yaml := fmt.Sprintf(`
http: { enabled: false }
%s    %s
    start_from: trim_horizon
    checkpoint: { dir: %s, commit_period: 100ms }
pipeline:
  threads: 1
  processors:
%s    - mapping: 'root = "%%s %%s %%d".format(@kinesis_sequence_number, @kinesis_sub_sequence_number, content().length())'
output:
  file: { path: %s, codec: lines }
logger: { level: warn }
`, fakeInputHead(srv, ca), readerYAML, cpDir, processors, outPath)
		if err := os.WriteFile(yamlPath, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return yamlPath, outPath
	}
	parse := func(line string) craftedLine {
		t.Helper()
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("output line %q: want <sequence number> <sub-sequence number> <length>", line)
		}
		l := craftedLine{agg: slices.Index(seqs, f[0])}
		var err1, err2 error
		l.sub, err1 = strconv.Atoi(f[1])
		l.length, err2 = strconv.Atoi(f[2])
		if l.agg < 0 || err1 != nil || err2 != nil || l.sub < 0 || l.sub >= inputtest.CraftedUserRecords {
			t.Fatalf("output line %q: not a user record of the crafted aggregates %v", line, seqs)
		}
		return l
	}
	peak := func(cmd *exec.Cmd, run string) int64 {
		t.Helper()
		hwm := memProcStatusBytes(t, cmd.Process.Pid, "VmHWM")
		t.Logf("%s run: peak RSS (VmHWM) %s", run, memFmt(hwm))
		if hwm > craftedRSSBound {
			t.Errorf("%s run: peak RSS %s exceeds %s: the crafted aggregates were not converted a part at a time",
				run, memFmt(hwm), memFmt(craftedRSSBound))
		}
		return hwm
	}

	// The first run stalls on one user record of aggregate 2; the batches
	// before it are written and acknowledged, so its checkpoint comes to
	// rest on the last line written, inside that aggregate.
	stall := fmt.Sprintf(`    - switch:
        - check: '@kinesis_sequence_number == "%s" && @kinesis_sub_sequence_number == "%d"'
          processors: [ { sleep: { duration: 1h } } ]
`, seqs[craftedStallAggregate], craftedStallSub)
	cfg1, out1 := config("run1", stall)
	log1 := filepath.Join(dir, "run1.log")
	first := run(t, bin, cfg1, log1)
	var atKill *checkpoint.Position
	deadline := time.Now().Add(time.Minute)
	for {
		if last := craftedLastLine(t, out1); last != "" {
			l := parse(last)
			cp := inputtest.ReadCheckpointsUnlocked(t, cpDir, arn).Shards["shardId-000000000000"].Position
			if l.agg == craftedStallAggregate && cp != nil && cp.Sequence == seqs[l.agg] && cp.SubSequence == int64(l.sub) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run did not come to rest inside aggregate %d within a minute; log:\n%s", craftedStallAggregate, memLog(log1))
		}
		time.Sleep(50 * time.Millisecond)
	}
	peak(first, "first")
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	atKill = inputtest.ReadCheckpoints(t, cpDir, arn).Shards["shardId-000000000000"].Position
	if atKill == nil || !atKill.Partial || atKill.Sequence != seqs[craftedStallAggregate] {
		t.Fatalf("the checkpoint at the kill is %+v, want one inside aggregate %d (%s)", atKill, craftedStallAggregate, seqs[craftedStallAggregate])
	}

	cfg2, out2 := config("run2", "")
	log2 := filepath.Join(dir, "run2.log")
	second := run(t, bin, cfg2, log2)
	final := fmt.Sprintf("%s %d 0", seqs[len(seqs)-1], inputtest.CraftedUserRecords-1)
	deadline = time.Now().Add(2 * time.Minute)
	for craftedLastLine(t, out2) != final {
		if time.Now().After(deadline) {
			t.Fatalf("the second run did not reach the last user record (%s) within 2 minutes; it wrote up to %q; log:\n%s",
				final, craftedLastLine(t, out2), memLog(log2))
		}
		time.Sleep(100 * time.Millisecond)
	}
	peak(second, "second")
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("the second run did not stop cleanly on SIGTERM: %v; log:\n%s", err, memLog(log2))
	}

	// Every user record once, but for those after the checkpoint at the kill
	// that the first run wrote and did not see acknowledged; each run in
	// order; the second from right after that checkpoint.
	seen := make([]uint8, craftedAggregates*inputtest.CraftedUserRecords)
	lines := [2]int{}
	for runIndex, out := range []string{out1, out2} {
		prev := craftedLine{agg: -1}
		craftedLines(t, out, func(line string) {
			l := parse(line)
			if l.length != 0 {
				t.Fatalf("run %d: user record %d of aggregate %d arrived with %d bytes, want 0", runIndex+1, l.sub, l.agg, l.length)
			}
			if l.agg < prev.agg || (l.agg == prev.agg && l.sub <= prev.sub) {
				t.Fatalf("run %d: user record %d/%d arrived after %d/%d: out of order", runIndex+1, l.agg, l.sub, prev.agg, prev.sub)
			}
			if runIndex == 1 && lines[1] == 0 {
				want := craftedLine{agg: craftedStallAggregate, sub: int(atKill.SubSequence) + 1}
				if l != want {
					t.Fatalf("the second run started at user record %d/%d, want %d/%d: right after the checkpoint at the kill (%v)",
						l.agg, l.sub, want.agg, want.sub, atKill)
				}
			}
			seen[l.agg*inputtest.CraftedUserRecords+l.sub]++
			lines[runIndex]++
			prev = l
		})
	}
	for i, n := range seen {
		if n == 0 {
			t.Fatalf("user record %d of aggregate %d never arrived (the runs wrote %d and %d lines)",
				i%inputtest.CraftedUserRecords, i/inputtest.CraftedUserRecords, lines[0], lines[1])
		}
	}
	t.Logf("%s: %d user records in %d crafted aggregates; the first run wrote %d and was killed at %v, the second wrote %d (%d repeated, all after that checkpoint)",
		reader, len(seen), craftedAggregates, lines[0], atKill, lines[1], lines[0]+lines[1]-len(seen))
}

// craftedLastLine returns the last complete line of the file at path, "" if
// none.
func craftedLastLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const tail = 256 // longer than any line
	from := max(0, st.Size()-tail)
	buf := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	text := string(buf)
	end := strings.LastIndexByte(text, '\n')
	if end < 0 {
		return ""
	}
	text = text[:end]
	return text[strings.LastIndexByte(text, '\n')+1:]
}

// craftedLines calls each with every line of the file at path.
func craftedLines(t *testing.T, path string, each func(string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		each(sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
