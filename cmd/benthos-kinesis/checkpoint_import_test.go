package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// TestCheckpointImport: the positions of an aws_kinesis checkpoint table
// and of a KCL lease table, laid out in dynalite as those consumers write
// them, are imported into the local store and into a lease table; the next
// run reads exactly the records after them: nothing lost, nothing again.
// The stream was split, so the import covers a closed parent, its
// children, a position inside a KPL aggregate and one on a plain record.
func TestCheckpointImport(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2))
	const s0, s1, s2, s3 = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"
	put := func(shard, prefix string, n int) {
		t.Helper()
		if err := srv.PutToShard("orders", shard, n, func(j int) []byte { return fmt.Appendf(nil, "%s-%d", prefix, j) }); err != nil {
			t.Fatal(err)
		}
	}
	put(s0, "a0", 10)
	put(s1, "a1", 10)
	if children, err := srv.SplitShard("orders", s0, ""); err != nil || len(children) != 2 || children[0] != s2 || children[1] != s3 {
		t.Fatalf("split: %v %v", children, err)
	}
	put(s2, "p2", 3)
	var users []kpl.UserRecord
	for j := range 4 {
		users = append(users, kpl.UserRecord{PartitionKey: "pk", Data: fmt.Appendf(nil, "g2-%d", j)})
	}
	agg, err := kpl.Pack(users)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.PutToShard("orders", s2, 1, func(int) []byte { return agg.Data }); err != nil {
		t.Fatal(err)
	}
	put(s2, "q2", 3)
	put(s3, "k3", 10)
	put(s1, "b1", 10)
	seqs := map[string]string{} // data (or "agg") -> sequence number
	for _, id := range []string{s0, s1, s2, s3} {
		recs, err := srv.ShardRecords("orders", id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			key := string(r.Data)
			if kpl.IsAggregated(r.Data) {
				key = "agg"
			}
			seqs[key] = aws.ToString(r.SequenceNumber)
		}
	}
	names := func(prefix string, from, to int) []string {
		var out []string
		for j := from; j <= to; j++ {
			out = append(out, fmt.Sprintf("%s-%d", prefix, j))
		}
		return out
	}
	d := emulator.Dynalite(t)
	ddb := d.Client()
	createTable := func(t *testing.T, name string, keys ...string) { createStringKeyTable(t, ddb, name, keys...) }
	putItem := func(t *testing.T, table string, item map[string]string, numbers map[string]string) {
		t.Helper()
		av := map[string]types.AttributeValue{}
		for k, v := range item {
			av[k] = &types.AttributeValueMemberS{Value: v}
		}
		for k, v := range numbers {
			av[k] = &types.AttributeValueMemberN{Value: v}
		}
		if _, err := ddb.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: av}); err != nil {
			t.Fatal(err)
		}
	}
	importCmd := command(bin, "checkpoint", "import", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dynamodb-endpoint", d.Endpoint)

	t.Run("aws_kinesis into the local store", func(t *testing.T) {
		t.Parallel()
		createTable(t, "connect-checkpoints", "StreamID", "ShardID")
		// Shard 0 was read to its end (aws_kinesis deleted its item), shard
		// 3 never reached; shard 1 is still leased by a running client.
		putItem(t, "connect-checkpoints", map[string]string{"StreamID": "orders", "ShardID": s1, "SequenceNumber": seqs["a1-9"], "ClientID": "connect-1", "LeaseTimeout": "2999-01-01T00:00:00Z"}, nil)
		putItem(t, "connect-checkpoints", map[string]string{"StreamID": "orders", "ShardID": s2, "SequenceNumber": seqs["p2-1"]}, nil)
		putItem(t, "connect-checkpoints", map[string]string{"StreamID": "other", "ShardID": s3, "SequenceNumber": seqs["k3-9"]}, nil)
		cpDir := filepath.Join(dir, "connect-cp")
		args := []string{"--dir", cpDir, "--from", "aws_kinesis", "--from-table", "connect-checkpoints"}
		if out, err := importCmd(args...); err == nil || !strings.Contains(out, "leased to aws_kinesis client connect-1") {
			t.Fatalf("import while aws_kinesis still holds a lease: %v\n%s", err, out)
		}
		// Its pipeline stopped: the final checkpoint drops ClientID.
		putItem(t, "connect-checkpoints", map[string]string{"StreamID": "orders", "ShardID": s1, "SequenceNumber": seqs["a1-9"]}, nil)
		out, err := importCmd(args...)
		if err != nil || !strings.Contains(out, "taken as read to their end: "+s0) || !strings.Contains(out, "read from their beginning: "+s3) {
			t.Fatalf("import: %v\n%s", err, out)
		}
		want := append(append(append(append(names("b1", 0, 9), "p2-2"), names("g2", 0, 3)...), names("q2", 0, 2)...), names("k3", 0, 9)...)
		p := startPipeline(t, bin, srv, ca, "dir: "+cpDir, "connect-run")
		if got := datas(p.stopAfter(len(want))); !sameSet(got, want) {
			t.Fatalf("after the import the run read %v, want exactly %v", got, want)
		}
	})

	t.Run("KCL 3.5 single table into the local store", func(t *testing.T) {
		t.Parallel()
		// KCL 3.5 keeps its leases (entityType LEASE; one written by an
		// earlier KCL has none), its workers' metrics and its coordinator
		// state in one table, keyed by leaseKey, as its DAOs write them.
		createTable(t, "kcl35-app", "leaseKey")
		putItem(t, "kcl35-app", map[string]string{"leaseKey": s0, "checkpoint": "SHARD_END", "entityType": "LEASE"}, map[string]string{"leaseCounter": "40", "checkpointSubSequenceNumber": "0", "throughput": "0"})
		putItem(t, "kcl35-app", map[string]string{"leaseKey": s1, "checkpoint": seqs["a1-4"], "entityType": "LEASE"}, map[string]string{"leaseCounter": "41", "checkpointSubSequenceNumber": "0", "throughput": "812.5"})
		putItem(t, "kcl35-app", map[string]string{"leaseKey": s2, "checkpoint": seqs["agg"]}, map[string]string{"leaseCounter": "42", "checkpointSubSequenceNumber": "1"})
		putItem(t, "kcl35-app", map[string]string{"leaseKey": s3, "checkpoint": "TRIM_HORIZON", "entityType": "LEASE"}, map[string]string{"leaseCounter": "3"})
		for _, w := range []string{"ip-10-0-1-17.ec2.internal", "ip-10-0-2-9.ec2.internal"} {
			putItem(t, "kcl35-app", map[string]string{"leaseKey": w, "entityType": "WORKER_METRIC_STATS"}, map[string]string{"lut": "1764892800"})
		}
		putItem(t, "kcl35-app", map[string]string{"leaseKey": "Migration3.0", "entityType": "CLIENT_VERSION_MIGRATION", "cv": "CLIENT_VERSION_3x"}, nil)
		putItem(t, "kcl35-app", map[string]string{"leaseKey": "TableMigration3.5", "entityType": "TABLE_MIGRATION", "tms": "COMPLETE"}, nil)
		// A lease of another stream of a multi-stream application.
		putItem(t, "kcl35-app", map[string]string{"leaseKey": "000000000000:clicks:1700000000:" + s0, "checkpoint": "TRIM_HORIZON", "entityType": "LEASE"}, map[string]string{"leaseCounter": "1"})
		cpDir := filepath.Join(dir, "kcl35-cp")
		out, err := importCmd("--dir", cpDir, "--from", "kcl", "--from-table", "kcl35-app")
		if err != nil || !strings.Contains(out, "Imported the positions of 4 shards") {
			t.Fatalf("import: %v\n%s", err, out)
		}
		for _, want := range []string{"Left aside, as no position of this stream:", "1 item of coordinator state (KCL 2.x to 3.x migration) (entityType CLIENT_VERSION_MIGRATION)",
			"1 item of coordinator state (migration to one table) (entityType TABLE_MIGRATION)", "2 items of worker metrics (entityType WORKER_METRIC_STATS)", "1 item of other streams, or no leases"} {
			if !strings.Contains(out, want) {
				t.Errorf("the import's output lacks %q:\n%s", want, out)
			}
		}
		want := append(append(append(append(names("a1", 5, 9), names("b1", 0, 9)...), "g2-2", "g2-3"), names("q2", 0, 2)...), names("k3", 0, 9)...)
		p := startPipeline(t, bin, srv, ca, "dir: "+cpDir, "kcl35-run")
		if got := datas(p.stopAfter(len(want))); !sameSet(got, want) {
			t.Fatalf("after the import the run read %v, want exactly %v", got, want)
		}
	})

	t.Run("KCL into a lease table", func(t *testing.T) {
		t.Parallel()
		createTable(t, "kcl-app", "leaseKey")
		putItem(t, "kcl-app", map[string]string{"leaseKey": s0, "checkpoint": "SHARD_END", "leaseOwner": "kcl-worker"}, map[string]string{"leaseCounter": "40", "checkpointSubSequenceNumber": "0"})
		putItem(t, "kcl-app", map[string]string{"leaseKey": s1, "checkpoint": seqs["a1-4"], "leaseOwner": "kcl-worker"}, map[string]string{"leaseCounter": "41", "checkpointSubSequenceNumber": "0"})
		putItem(t, "kcl-app", map[string]string{"leaseKey": s2, "checkpoint": seqs["agg"], "leaseOwner": "kcl-worker"}, map[string]string{"leaseCounter": "42", "checkpointSubSequenceNumber": "1"})
		// Multi-stream mode names the stream in the key.
		putItem(t, "kcl-app", map[string]string{"leaseKey": "000000000000:orders:1700000000:" + s3, "checkpoint": "TRIM_HORIZON"}, map[string]string{"leaseCounter": "3"})
		out, err := importCmd("--table", "leases", "--from", "kcl", "--from-table", "kcl-app")
		if err != nil || !strings.Contains(out, "Imported the positions of 4 shards") {
			t.Fatalf("import: %v\n%s", err, out)
		}
		want := append(append(append(append(names("a1", 5, 9), names("b1", 0, 9)...), "g2-2", "g2-3"), names("q2", 0, 2)...), names("k3", 0, 9)...)
		p := startPipeline(t, bin, srv, ca, "dynamodb: { table: leases, endpoint: '"+d.Endpoint+"', lease_period: 2s }", "kcl-run")
		if got := datas(p.stopAfter(len(want))); !sameSet(got, want) {
			t.Fatalf("after the import the run read %v, want exactly %v", got, want)
		}
		// A second import finds the leases of the run's instance gone
		// (stopped cleanly) and writes again; a stale owner needs --force.
		if out, err := importCmd("--table", "leases", "--from", "kcl", "--from-table", "kcl-app"); err != nil {
			t.Fatalf("import again after a clean stop: %v\n%s", err, out)
		}
		tb, err := lease.Open(t.Context(), ddb, "leases", false)
		if err != nil {
			t.Fatal(err)
		}
		it, _, err := tb.Get(t.Context(), srv.StreamARN("orders"), s1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Take(t.Context(), it, "ghost", ""); err != nil {
			t.Fatal(err)
		}
		set := command(bin, "checkpoint", "set", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dynamodb-endpoint", d.Endpoint, "--table", "leases", "--to-latest")
		if out, err := set(); err == nil || !strings.Contains(out, "shard "+s1+" is leased to ghost") {
			t.Fatalf("set while a lease names an owner: %v\n%s", err, out)
		}
		if out, err := set("--force"); err != nil || !strings.Contains(out, "Moved 4 shards") {
			t.Fatalf("set --force: %v\n%s", err, out)
		}
		if got, _, err := tb.Get(t.Context(), srv.StreamARN("orders"), s1); err != nil || got.Owner != "" || got.Checkpoint.Start.Kind != "AT_TIMESTAMP" {
			t.Fatalf("after set --force: %+v, %v; want free, at a timestamp", got, err)
		}
	})

	t.Run("a group of this input into another", func(t *testing.T) {
		t.Parallel()
		tb, err := lease.Open(t.Context(), ddb, "shared", true)
		if err != nil {
			t.Fatal(err)
		}
		arn := srv.StreamARN("orders")
		at := func(seq string) checkpoint.Checkpoint {
			return checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Position: &checkpoint.Position{Sequence: seq}}
		}
		// The pipeline of no group read shard 0 to its end, shard 1 to
		// a1-4 (and still holds it), shard 2 to p2-2; shard 3 not yet.
		for id, cp := range map[string]checkpoint.Checkpoint{
			s0: {Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Ended: true}, s1: at(seqs["a1-4"]), s2: at(seqs["p2-2"]),
		} {
			it, _, err := tb.Create(t.Context(), lease.Shard{Stream: arn, ShardID: id, Checkpoint: cp})
			if err != nil {
				t.Fatal(err)
			}
			if id == s1 {
				if _, err := tb.Take(t.Context(), it, "old-1", ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		args := []string{"--table", "shared", "--group", "indexer", "--from", "benthos-kinesis", "--from-table", "shared"}
		if out, err := importCmd(args...); err == nil || !strings.Contains(out, "leased by instance old-1") {
			t.Fatalf("import while the group of no group still holds a lease: %v\n%s", err, out)
		}
		if out, err := importCmd(append(args, "--from-group", "nobody", "--force")...); err == nil || !strings.Contains(out, "no item of the stream in group nobody") {
			t.Fatalf("import from an empty group: %v\n%s", err, out)
		}
		out, err := importCmd(append(args, "--force")...)
		if err != nil || !strings.Contains(out, "Imported the positions of 3 shards") || !strings.Contains(out, "read from their beginning: "+s3) {
			t.Fatalf("import --force: %v\n%s", err, out)
		}
		want := append(append(append(append(names("a1", 5, 9), names("b1", 0, 9)...), names("g2", 0, 3)...), names("q2", 0, 2)...), names("k3", 0, 9)...)
		p := startPipeline(t, bin, srv, ca, "dynamodb: { table: shared, group: indexer, endpoint: '"+d.Endpoint+"', lease_period: 2s }", "group-run")
		if got := datas(p.stopAfter(len(want))); !sameSet(got, want) {
			t.Fatalf("the new group read %v, want exactly %v", got, want)
		}
		// The group of no group kept its own leases.
		if it, _, err := tb.Get(t.Context(), arn, s1); err != nil || it.Owner != "old-1" || it.Checkpoint.Position.Sequence != seqs["a1-4"] {
			t.Fatalf("the source's shard 1: %+v, %v; want it as it was", it, err)
		}
	})

	if out, err := importCmd("--dir", filepath.Join(dir, "x"), "--from", "kcl", "--from-table", "missing"); err == nil || !strings.Contains(out, "--from-table missing does not exist") {
		t.Fatalf("import from a missing table: %v\n%s", err, out)
	}
	if out, err := importCmd("--dir", filepath.Join(dir, "x"), "--from", "flink", "--from-table", "connect-checkpoints"); err == nil || !strings.Contains(out, `--from "flink": expected aws_kinesis, kcl or benthos-kinesis`) {
		t.Fatalf("import from an unknown layout: %v\n%s", err, out)
	}
}

// TestImportPlan: what a shard the other consumer's table does not mention
// becomes. aws_kinesis deletes a finished shard's item, so a closed shard
// without one is read; KCL reads children only after their parents, so a
// closed shard without a lease is read only when a descendant has one, and
// read from its beginning otherwise; an open shard without one is read from
// its beginning either way.
func TestImportPlan(t *testing.T) {
	// 0 closed, parent of 2 (closed, parent of 4); 1 closed, no children
	// listed; 3 open, no parent; 4 open.
	shards := []streamShard{
		{id: "s0", closed: true}, {id: "s1", closed: true}, {id: "s2", closed: true, parents: []string{"s0"}},
		{id: "s3"}, {id: "s4", parents: []string{"s2"}},
	}
	pos := checkpoint.Position{Sequence: "9"}
	got := map[string]imported{"s4": {cp: checkpoint.Checkpoint{Position: &pos}}}
	for _, c := range []struct {
		from  string
		ended map[string]bool
	}{
		{"aws_kinesis", map[string]bool{"s0": true, "s1": true, "s2": true}},
		{"kcl", map[string]bool{"s0": true, "s2": true}},
	} {
		plan, _ := importPlan(shards, got, c.from)
		for _, s := range shards {
			cp := plan[s.id]
			switch {
			case s.id == "s4":
				if cp.Position == nil || cp.Position.Sequence != "9" || cp.Ended {
					t.Errorf("%s: the mentioned shard s4 became %+v", c.from, cp)
				}
			case c.ended[s.id] != cp.Ended:
				t.Errorf("%s: shard %s ended %v, want %v", c.from, s.id, cp.Ended, c.ended[s.id])
			case !cp.Ended && (cp.Position != nil || cp.Start.Kind != "TRIM_HORIZON"):
				t.Errorf("%s: shard %s is %+v, want it read from its beginning", c.from, s.id, cp)
			}
		}
	}
}

// TestCheckpointImportRefusesWhatItCannotRead: before, a KCL
// checkpointSubSequenceNumber stored as the string "7" was imported as 0
// (7 user records delivered again), a checkpoint of the wrong type was
// reported as `checkpoint ""`, an aws_kinesis SequenceNumber stored as a
// number imported as "no position", a KCL lease with a live owner was
// imported, a shard not in the stream was counted as imported, and a
// sequence number beyond its shard or of another shard was accepted (the
// next run then skipped every record of the shard for good). Each is now
// refused or reported, naming the item, the attribute and its type, or the
// shard, the number and the range.
func TestCheckpointImportRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	bin, _, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2))
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	seqs := map[string]string{}
	for _, id := range []string{s0, s1} {
		if err := srv.PutToShard("orders", id, 3, func(j int) []byte { return fmt.Appendf(nil, "%s-%d", id, j) }); err != nil {
			t.Fatal(err)
		}
		recs, err := srv.ShardRecords("orders", id)
		if err != nil {
			t.Fatal(err)
		}
		seqs[id] = aws.ToString(recs[1].SequenceNumber)
	}
	d := emulator.Dynalite(t)
	ddb := d.Client()
	S := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	N := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	table := func(t *testing.T, keys []string, items ...map[string]types.AttributeValue) string {
		t.Helper()
		name := strings.NewReplacer(" ", "-", "/", "-", "'", "").Replace(t.Name())
		name = name[strings.LastIndex(name, "-")+1:]
		name = fmt.Sprintf("t%d-%s", len(t.Name()), name)
		createStringKeyTable(t, ddb, name, keys...)
		for _, it := range items {
			if _, err := ddb.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: it}); err != nil {
				t.Fatal(err)
			}
		}
		return name
	}
	importCmd := func(t *testing.T, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"checkpoint", "import", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dynamodb-endpoint", d.Endpoint, "--dir", t.TempDir(), "--kcl-failover-time", "1s"}, args...)...)
		cmd.Env = fakeAWSEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	kcl := []string{"leaseKey"}
	awsk := []string{"StreamID", "ShardID"}
	cases := []struct {
		name  string
		from  string
		keys  []string
		items []map[string]types.AttributeValue
		want  []string
	}{
		{"kcl sub-sequence a string", "kcl", kcl, []map[string]types.AttributeValue{
			{"leaseKey": S(s0), "checkpoint": S(seqs[s0]), "checkpointSubSequenceNumber": S("7"), "leaseCounter": N("1")}},
			[]string{"item leaseKey " + s0, "checkpointSubSequenceNumber", "of type S", `"7"`, "expected N"}},
		{"kcl checkpoint a number", "kcl", kcl, []map[string]types.AttributeValue{
			{"leaseKey": S(s0), "checkpoint": N("4959"), "leaseCounter": N("1")}},
			[]string{"item leaseKey " + s0, "attribute checkpoint is of type N", "expected S"}},
		{"aws_kinesis sequence a number", "aws_kinesis", awsk, []map[string]types.AttributeValue{
			{"StreamID": S("orders"), "ShardID": S(s0), "SequenceNumber": N("49590338271490256608")}},
			[]string{"item StreamID orders, ShardID " + s0, "attribute SequenceNumber is of type N", "expected S"}},
		{"kcl beyond its shard", "kcl", kcl, []map[string]types.AttributeValue{
			{"leaseKey": S(s0), "checkpoint": S(strings.Repeat("9", 56)), "leaseCounter": N("1")}},
			[]string{"shard " + s0, strings.Repeat("9", 56) + " is not a position in shard " + s0, "which holds 49"}},
		{"aws_kinesis of another shard", "aws_kinesis", awsk, []map[string]types.AttributeValue{
			{"StreamID": S("orders"), "ShardID": S(s0), "SequenceNumber": S(seqs[s1])}},
			[]string{seqs[s1] + " is not a position in shard " + s0, "which holds 49"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := table(t, tc.keys, tc.items...)
			out, err := importCmd(t, "--from", tc.from, "--from-table", name)
			if err == nil {
				t.Fatalf("import succeeded:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not name %q:\n%s", w, out)
				}
			}
		})
	}

	t.Run("kcl shard not in the stream", func(t *testing.T) {
		t.Parallel()
		name := table(t, kcl,
			map[string]types.AttributeValue{"leaseKey": S(s0), "checkpoint": S(seqs[s0]), "leaseCounter": N("1")},
			map[string]types.AttributeValue{"leaseKey": S("shardId-000000000009"), "checkpoint": S(seqs[s1]), "leaseCounter": N("1")})
		out, err := importCmd(t, "--from", "kcl", "--from-table", name)
		if err != nil || !strings.Contains(out, "Imported the positions of 1 shards") || !strings.Contains(out, "Not imported: positions of shards not in the stream") || !strings.Contains(out, "shardId-000000000009") {
			t.Fatalf("import: %v\n%s", err, out)
		}
	})

	t.Run("kcl lease with a live owner", func(t *testing.T) {
		t.Parallel()
		name := table(t, kcl, map[string]types.AttributeValue{"leaseKey": S(s0), "checkpoint": S(seqs[s0]), "leaseOwner": S("kcl-worker-1"), "leaseCounter": N("1")})
		// The KCL worker renews its lease while the import looks.
		done := make(chan struct{})
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			for n := 2; ; n++ {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
				ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
					"leaseKey": S(s0), "checkpoint": S(seqs[s0]), "leaseOwner": S("kcl-worker-1"), "leaseCounter": N(fmt.Sprint(n))}})
			}
		}()
		out, err := importCmd(t, "--from", "kcl", "--from-table", name)
		close(done)
		<-renewed
		if err == nil || !strings.Contains(out, "leased to KCL worker kcl-worker-1") || !strings.Contains(out, "--force") {
			t.Fatalf("import while a KCL worker renews its lease: %v\n%s", err, out)
		}
		// Stopped: its counter no longer moves, and the import goes ahead.
		if out, err := importCmd(t, "--from", "kcl", "--from-table", name); err != nil {
			t.Fatalf("import once the KCL worker stopped: %v\n%s", err, out)
		}
	})
}

// createStringKeyTable creates a table whose key attributes are strings:
// the first the hash key, a second the range key; it waits until it is
// active.
func createStringKeyTable(t *testing.T, ddb *dynamodb.Client, name string, keys ...string) {
	t.Helper()
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest}
	for i, k := range keys {
		kt := types.KeyTypeHash
		if i > 0 {
			kt = types.KeyTypeRange
		}
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k), KeyType: kt})
	}
	if _, err := ddb.CreateTable(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.NewTableExistsWaiter(ddb).Wait(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond }); err != nil {
		t.Fatal(err)
	}
}
