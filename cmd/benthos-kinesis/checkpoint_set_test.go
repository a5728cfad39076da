package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestCheckpointSet: `checkpoint set --to-timestamp` rewinds a stream that
// was read to its end, and the next run reads exactly the records written
// from that time; `--after-sequence` moves one shard, and the next run
// reads exactly the records after it. A set is refused while a pipeline
// holds the store, and without a place or with a wrong shard.
func TestCheckpointSet(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, ca := startFake(t, dir, kinesisfake.Stream("orders", 2))
	shards := []string{"shardId-000000000000", "shardId-000000000001"}
	put := func(batch string) {
		for i, id := range shards {
			if err := srv.PutToShard("orders", id, 10, func(j int) []byte { return fmt.Appendf(nil, "%s%d-%d", batch, i, j) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("a")
	// The rewind point: after every record of batch a, before any of b
	// (arrival times are compared to the millisecond).
	at := time.Now().Add(time.Millisecond)
	for time.Now().Before(at.Add(2 * time.Millisecond)) {
		time.Sleep(time.Millisecond)
	}
	put("b")
	cpDir := filepath.Join(dir, "cp")
	set := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"checkpoint", "set", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dir", cpDir}, args...)...)
		cmd.Env = fakeAWSEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	first := startPipeline(t, bin, srv, ca, "dir: "+cpDir, "run1")
	waitLinesOrLog(t, first, 1)
	if out, err := set("--to-trim-horizon"); err == nil || !strings.Contains(out, "a pipeline is reading stream") {
		t.Fatalf("set while a pipeline holds the store: %v\n%s", err, out)
	}
	if got := first.stopAfter(40); len(got) != 40 {
		t.Fatalf("the first run read %d records, want all 40", len(got))
	}

	out, err := set("--to-timestamp", at.UTC().Format(time.RFC3339Nano))
	if err != nil || !strings.Contains(out, "Moved 2 shards") || !strings.Contains(out, "AT_TIMESTAMP") {
		t.Fatalf("set --to-timestamp: %v\n%s", err, out)
	}
	second := startPipeline(t, bin, srv, ca, "dir: "+cpDir, "run2")
	got := second.stopAfter(20)
	var want []string
	for i := range shards {
		for j := range 10 {
			want = append(want, fmt.Sprintf("b%d-%d", i, j))
		}
	}
	if d := datas(got); !sameSet(d, want) {
		t.Fatalf("after the rewind the run read %v, want exactly %v", d, want)
	}

	// One shard, after a record of it.
	var seq string
	for _, g := range got {
		if g.Data == "b0-4" {
			seq = g.Seq
		}
	}
	out, err = set("--shard", shards[0], "--after-sequence", seq)
	if err != nil || !strings.Contains(out, "Moved 1 shards") {
		t.Fatalf("set --after-sequence: %v\n%s", err, out)
	}
	third := startPipeline(t, bin, srv, ca, "dir: "+cpDir, "run3")
	if d, want := datas(third.stopAfter(5)), []string{"b0-5", "b0-6", "b0-7", "b0-8", "b0-9"}; !slices.Equal(d, want) {
		t.Fatalf("after --after-sequence the run read %v, want exactly %v", d, want)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "say where to"},
		{[]string{"--to-latest", "--to-trim-horizon"}, "--to-trim-horizon and --to-latest name several places"},
		{[]string{"--after-sequence", seq}, "give exactly one --shard"},
		{[]string{"--after-sequence", "12x"}, `"12x": not a sequence number`},
		{[]string{"--shard", "shardId-000000000009", "--to-latest"}, `--shard "shardId-000000000009": no such shard`},
		{[]string{"--shard", shards[1], "--after-sequence", "1"}, "not a sequence number of shard " + shards[1]},
		{[]string{"--to-timestamp", "yesterday"}, "neither an RFC 3339 time nor a duration"},
		{[]string{"--to-latest", "--force"}, "--force applies to --table only"},
	} {
		if out, err := set(c.args...); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("set %v: %v, want an error saying %q:\n%s", c.args, err, c.want, out)
		}
	}
}

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
