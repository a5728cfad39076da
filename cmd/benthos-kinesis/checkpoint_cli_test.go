package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestCheckpointShow: `checkpoint show` prints every shard's position,
// start and owner, from the local store (without its lock, while a pipeline
// holds it) and from a lease table, as a table and as JSON.
func TestCheckpointShow(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2))
	arn := srv.StreamARN("orders")
	show := command(bin, "checkpoint", "show", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca)
	// Positions of shard 0 (at its start); shard 1 is closed by a split,
	// so that its end is one the listing allows.
	listed, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	seq0 := aws.ToString(listed[0].SequenceNumberRange.StartingSequenceNumber)
	if _, err := srv.SplitShard("orders", "shardId-000000000001", ""); err != nil {
		t.Fatal(err)
	}

	// The local store, locked by an open store as by a running pipeline.
	cpDir := filepath.Join(dir, "cp")
	store, err := checkpoint.OpenFile(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ts := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := checkpoint.Stream{ARN: arn, Shards: map[string]checkpoint.Checkpoint{
		"shardId-000000000000": {Start: checkpoint.Start{Kind: "AT_TIMESTAMP", Timestamp: &ts}, Position: &checkpoint.Position{Sequence: seq0, SubSequence: 3, Partial: true}},
		"shardId-000000000001": {Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Ended: true},
	}}
	if _, err := store.Load(t.Context(), arn); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	out, err := show("--dir", cpDir)
	if err != nil {
		t.Fatalf("show --dir: %v\n%s", err, out)
	}
	for _, want := range []string{"SHARD", "shardId-000000000000  " + seq0 + "/3", "AT_TIMESTAMP 2026-12-01T00:00:00.000Z", "shardId-000000000001  SHARD_END"} {
		if !strings.Contains(out, want) {
			t.Errorf("show --dir lacks %q:\n%s", want, out)
		}
	}

	// A lease table, as JSON.
	d := emulator.Dynalite(t)
	tb, err := lease.Open(t.Context(), d.Client(), "leases", true)
	if err != nil {
		t.Fatal(err)
	}
	it, _, err := tb.Create(t.Context(), lease.Shard{Stream: arn, ShardID: "shardId-000000000000", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
	if err != nil {
		t.Fatal(err)
	}
	it, err = tb.Take(t.Context(), it, "worker-a", "")
	if err != nil {
		t.Fatal(err)
	}
	pos := checkpoint.Position{Sequence: seq0}
	if _, err := tb.Hold(t.Context(), arn, it.ShardID, "worker-a", it.Counter, lease.Write{Checkpoint: &checkpoint.Checkpoint{Position: &pos}, KeepAsked: true}); err != nil {
		t.Fatal(err)
	}
	out, err = show("--table", "leases", "--dynamodb-endpoint", d.Endpoint, "--json")
	if err != nil {
		t.Fatalf("show --table: %v\n%s", err, out)
	}
	var got struct {
		StreamARN string     `json:"stream_arn"`
		Shards    []shardRow `json:"shards"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("show --json printed no JSON (%v):\n%s", err, out)
	}
	want := shardRow{Shard: "shardId-000000000000", Position: seq0, Start: "TRIM_HORIZON", Owner: "worker-a", Counter: 2}
	if got.StreamARN != arn || len(got.Shards) != 1 || got.Shards[0] != want {
		t.Fatalf("show --table --json: %+v, want %s and %+v", got, arn, want)
	}

	// Another group's leases of the same shard, in the same table: each
	// group sees its own.
	search := lease.Grouped(tb, "search")
	it, _, err = search.Create(t.Context(), lease.Shard{Stream: arn, ShardID: "shardId-000000000000", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "LATEST"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = search.Take(t.Context(), it, "worker-b", ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		want  shardRow
	}{
		{nil, want},
		{[]string{"--group", "search"}, shardRow{Shard: "shardId-000000000000", Start: "LATEST", Owner: "worker-b", Counter: 1}},
	} {
		out, err = show(append([]string{"--table", "leases", "--dynamodb-endpoint", d.Endpoint, "--json"}, tc.flags...)...)
		if err != nil {
			t.Fatalf("show --table %v: %v\n%s", tc.flags, err, out)
		}
		got.Shards = nil
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Shards) != 1 || got.Shards[0] != tc.want {
			t.Fatalf("show --table %v --json: %+v (%v), want %+v", tc.flags, got, err, tc.want)
		}
	}
	if out, err := show("--dir", cpDir, "--group", "search"); err == nil || !strings.Contains(out, "--group applies to --table only") {
		t.Fatalf("show --dir --group: %v\n%s", err, out)
	}
	if out, err := show("--table", "leases", "--dynamodb-endpoint", d.Endpoint, "--group", "a b"); err == nil || !strings.Contains(out, `--group "a b": expected a group name`) {
		t.Fatalf("show --group 'a b': %v\n%s", err, out)
	}

	if out, err := show(); err == nil || !strings.Contains(out, "give the store: --dir") {
		t.Fatalf("show without a store: %v\n%s", err, out)
	}
	// The hint is the command's, not the config's (before: "set create:
	// true").
	if out, err := show("--table", "missing", "--dynamodb-endpoint", d.Endpoint); err == nil || !strings.Contains(out, `--table: DynamoDB table "missing" does not exist: give --table the name of the input's lease table`) || strings.Contains(out, "create: true") {
		t.Fatalf("show of a missing table: %v\n%s", err, out)
	}
}

// TestCheckpointShowBrokenFileAndMissingDir: a shard of a checkpoint file
// whose position is not a sequence number, or is below its shard's start,
// is shown BROKEN with the reason (before, it was printed as if it were a
// position), and a --dir that does
// not exist is an error saying so (before: exit 0 and "no checkpoint").
func TestCheckpointShowBrokenFileAndMissingDir(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2))
	arn := srv.StreamARN("orders")
	show := command(bin, "checkpoint", "show", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca)
	cpDir := filepath.Join(dir, "cp")
	if err := os.MkdirAll(cpDir, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `{"version": 1, "stream_arn": "` + arn + `", "stream_created": "0001-01-01T00:00:00Z", "shards": {
  "shardId-000000000000": {"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "not-a-number"}},
  "shardId-000000000001": {"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "4901"}}}}`
	if err := os.WriteFile(filepath.Join(cpDir, "us-east-1.000000000000.orders.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := show("--dir", cpDir)
	if err != nil {
		t.Fatalf("show --dir: %v\n%s", err, out)
	}
	for _, want := range []string{"shardId-000000000000  BROKEN", "shardId-000000000000 is BROKEN", "position.sequence_number", "not-a-number",
		// Below its shard's start: the listing proves it wrong.
		"shardId-000000000001 is BROKEN", "the stored position: sequence number 4901 is not a position in shard shardId-000000000001, which holds 49"} {
		if !strings.Contains(out, want) {
			t.Errorf("show --dir lacks %q:\n%s", want, out)
		}
	}
	out, err = show("--dir", cpDir, "--json")
	if err != nil || !strings.Contains(out, `"broken": "checkpoint file`) {
		t.Errorf("show --json does not give the reason: %v\n%s", err, out)
	}

	missing := filepath.Join(dir, "typo")
	out, err = show("--dir", missing)
	if err == nil || !strings.Contains(out, "does not exist") || !strings.Contains(out, missing) {
		t.Fatalf("show --dir of a missing directory: %v\n%s", err, out)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("show created the missing directory")
	}
}
