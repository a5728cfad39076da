package main

import (
	"cmp"
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
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// run starts the binary with a config; its output goes to a log file.
func run(t *testing.T, bin, config, logPath string, env ...string) *exec.Cmd {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", config)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
	})
	return cmd
}

// outputLine is a line the pipeline of killAndRestart writes.
type outputLine struct {
	Stream, Data, Shard, Seq, Sub, PK string
	// OutOfRange is kinesis_hash_key_out_of_range, false when absent; a value
	// that is not a boolean fails the decoding.
	OutOfRange bool `json:"out_of_range"`
}

// readOutput parses the JSON lines the pipeline wrote.
func readOutput(t *testing.T, path string) []inputtest.Got {
	t.Helper()
	var out []inputtest.Got
	readJSONLines(t, path, func(m outputLine) {
		out = append(out, inputtest.Got{Stream: m.Stream, Data: m.Data, Shard: m.Shard, Seq: m.Seq, Sub: m.Sub, PK: m.PK, OutOfRange: m.OutOfRange})
	})
	return out
}

func waitLines(t *testing.T, path string, n int, within time.Duration) []inputtest.Got {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := readOutput(t, path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d lines within %v", path, len(got), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSIGKILLLosesNothing kills the real binary with SIGKILL in the middle of
// a stream and starts it again: every record arrives, and the only records
// delivered twice are ones that were not yet acknowledged and committed when
// the process died.
func TestSIGKILLLosesNothing(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 4)
	want := inputtest.Produce(t, client, "orders", "k", 1600, 37)
	killAndRestart(t, k, want, killPlan{})
}

// TestSIGKILLInsideAggregate is TestSIGKILLLosesNothing with KPL aggregates
// of 50 user records cut by batches of 7. The first run's pipeline stalls on
// user record 25 of one aggregate (a sleep of an hour), so the checkpoint at
// the kill sits inside that aggregate, just before the stalled batch. No user
// record is flagged out of its shard's range: the KPL never mixes shards.
func TestSIGKILLInsideAggregate(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	client := k.Client()
	inputtest.CreateStream(t, client, "orders", 2)
	prod := inputtest.ProduceAggregated(t, client, "orders", "u", inputtest.AggregateMix{Aggregates: 60, MinUsers: 50, MaxUsers: 50, Seed: 6})
	plan, stalled := stallInsideAggregate(k.StreamARN("orders"))
	atKill, all := killAndRestart(t, k, prod.Users, plan)
	checkPartial(t, atKill, *stalled)
	if n := inputtest.CheckPlacement(t, all, prod.Placed); n != 0 {
		t.Fatalf("%d KPL user records flagged out of their shard's range", n)
	}
}

// stallInsideAggregate plans the kill of TestSIGKILLInsideAggregate, for
// aggregates of 50 user records with data "u-<index>" and no plain records:
// batches of 7 cut the aggregates, and the first run's pipeline stalls on
// user record 25 of aggregate 15 (a sleep of an hour) and is killed once the
// last record delivered before it is its shard's committed checkpoint.
// *stalled is then that shard.
func stallInsideAggregate(streamARN string) (plan killPlan, stalled *string) {
	const first, stall = "u-0000750", "u-0000775" // aggregate 15: its user records 0 and 25
	stalled = new(string)
	return killPlan{
		extraInput:      "    batching: { count: 7, period: 100ms }\n",
		firstProcessors: "    - sleep: { duration: '${! if content().string() == \"" + stall + "\" { \"1h\" } else { \"0s\" } }' }\n",
		ready: func(t *testing.T, cpDir string, got []inputtest.Got) bool {
			var last *inputtest.Got
			for i, m := range got {
				if m.Data >= first && m.Data < stall && (last == nil || m.Data > last.Data) {
					last = &got[i]
				}
			}
			if last == nil {
				return false
			}
			cp := inputtest.ReadCheckpointsUnlocked(t, cpDir, streamARN).Shards[last.Shard].Position
			*stalled = last.Shard
			return cp != nil && cp.Sequence == last.Seq && cp.SubSequence == last.Position().SubSequence
		},
	}, stalled
}

// checkPartial asserts that the checkpoint of shard at the kill lies inside
// an aggregate.
func checkPartial(t *testing.T, atKill checkpoint.Stream, shard string) {
	t.Helper()
	if cp := atKill.Shards[shard].Position; cp == nil || !cp.Partial {
		t.Fatalf("the checkpoint of shard %s at the kill is %+v, want one inside the stalled aggregate", shard, cp)
	}
}

// killPlan varies killAndRestart.
type killPlan struct {
	stream string // the stream to read; "" is orders
	// efo reads by Enhanced Fan-Out, through an emulator.EFOProxy in front
	// of the emulator; else by polling.
	efo bool
	// keysInManyShards tells that the producer stored a partition key in
	// several shards: key order is then checked per shard.
	keysInManyShards bool
	extraInput       string // YAML lines added to the input, both runs
	firstProcessors  string // YAML processors put first in the first run
	// ready tells when to kill the first run, from the lines it wrote;
	// nil: once 600 lines are out.
	ready func(t *testing.T, cpDir string, got []inputtest.Got) bool
}

// killAndRestart runs the binary, kills it with SIGKILL once the plan says
// so, runs it again until every record is out, and checks the outcome:
// every record arrives, the only ones delivered twice lie after the
// checkpoint at the kill, and each run, as well as the first deliveries over
// both, keeps the order of shards and partition keys. It returns the
// checkpoints as they were at the kill, and every line both runs wrote.
func killAndRestart(t *testing.T, k *emulator.Kinesis, want inputtest.Produced, plan killPlan) (atKill checkpoint.Stream, all []inputtest.Got) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	stream := cmp.Or(plan.stream, "orders")
	endpoint, reader := k.Endpoint, "reader: polling\n    polling: { limit: 50 }"
	if plan.efo {
		endpoint, reader = emulator.EFOProxy(t, k.Endpoint), "reader: efo\n    efo: { consumer_name: app }"
	}
	checkOrder := inputtest.CheckOrder
	if plan.keysInManyShards {
		checkOrder = inputtest.CheckOrderKeysPerShard
	}

	dir := t.TempDir()
	cpDir := filepath.Join(dir, "checkpoints")
	config := func(out, firstProcessors string) string {
		path := filepath.Join(dir, strings.TrimSuffix(filepath.Base(out), ".jsonl")+".yaml")
		yaml := fmt.Sprintf(`
input:
  aws_kinesis_streams:
    streams: [ %s ]
    endpoint: %s
    region: %s
    credentials: { id: %s, secret: %s }
    %s
    start_from: trim_horizon
    checkpoint: { dir: '%s', commit_period: 100ms }
%spipeline:
  threads: 1 # strict order per shard into the output
  processors:
%s%soutput:
  file:
    path: %s
    codec: lines
logger:
  level: warn
`, stream, endpoint, k.Region, emulator.AccessKeyID, emulator.SecretAccessKey, reader, cpDir, plan.extraInput, firstProcessors, recordMapping, out)
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	out1 := filepath.Join(dir, "run1.jsonl")
	first := run(t, bin, config(out1, plan.firstProcessors), filepath.Join(dir, "run1.log"))
	if plan.ready == nil {
		waitLines(t, out1, 600, time.Minute)
	} else {
		deadline := time.Now().Add(time.Minute)
		for !plan.ready(t, cpDir, readOutput(t, out1)) {
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(filepath.Join(dir, "run1.log"))
				t.Fatalf("the first run was not ready to be killed within a minute; log:\n%s", log)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	atKill = inputtest.ReadCheckpoints(t, cpDir, k.StreamARN(stream))
	got1 := readOutput(t, out1)
	if len(got1) >= len(want) {
		t.Fatalf("the first run read all %d records before the kill", len(got1))
	}

	out2 := filepath.Join(dir, "run2.jsonl")
	second := run(t, bin, config(out2, ""), filepath.Join(dir, "run2.log"))
	deadline := time.Now().Add(time.Minute)
	for {
		union := map[string]bool{}
		for _, m := range append(got1, readOutput(t, out2)...) {
			union[m.Data] = true
		}
		if len(union) == len(want) {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "run2.log"))
			t.Fatalf("after the restart only %d of %d records arrived; log:\n%s", len(union), len(want), log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("the second run did not stop cleanly on SIGTERM: %v", err)
	}
	got2 := readOutput(t, out2)

	all = append(append([]inputtest.Got(nil), got1...), got2...)
	inputtest.CheckDelivery(t, all, want, false)
	count := map[string]int{}
	for _, m := range all {
		count[m.Data]++
	}
	dups := 0
	for _, m := range all {
		if count[m.Data] > 1 {
			dups++
			if !inputtest.AfterCheckpoint(m, atKill) {
				t.Fatalf("record %s (shard %s seq %s) was delivered twice although it was committed before the kill", m.Data, m.Shard, m.Seq)
			}
		}
	}
	checkOrder(t, got1)
	checkOrder(t, got2)
	// Run 1 wrote a prefix of each shard, run 2 each shard from its
	// checkpoint on: the first delivery of each record keeps the order too.
	firsts, seen := []inputtest.Got(nil), map[string]bool{}
	for _, m := range all {
		if !seen[m.Data] {
			seen[m.Data] = true
			firsts = append(firsts, m)
		}
	}
	checkOrder(t, firsts)
	t.Logf("run 1 wrote %d lines, run 2 %d; %d deliveries of repeated records, all after the checkpoint at the kill", len(got1), len(got2), dups)
	return atKill, all
}
