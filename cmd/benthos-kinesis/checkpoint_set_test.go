package main

import (
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestCheckpointSet: `checkpoint set --to-timestamp` rewinds a stream that
// was read to its end, and the next run reads exactly the records written
// from that time; `--after-sequence` moves one shard, and the next run
// reads exactly the records after it. A set is refused while a pipeline
// holds the store, and without a place or with a wrong shard.
func TestCheckpointSet(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2))
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
	set := command(bin, "checkpoint", "set", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dir", cpDir)

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
		{[]string{"--shard", shards[1], "--after-sequence", "1"}, "sequence number 1 is not a position in shard " + shards[1] + " of stream " + srv.StreamARN("orders") + ", which holds 49"},
		// Before, these two were accepted ("Moved 1 shards"): the next run
		// had the number refused, fell back to TRIM_HORIZON skipping up to
		// it, and so skipped every record of the shard for good.
		{[]string{"--shard", shards[0], "--after-sequence", strings.Repeat("9", 56)}, "sequence number " + strings.Repeat("9", 56) + " is not a position in shard " + shards[0]},
		{[]string{"--shard", shards[0], "--after-sequence", seqOf(got, "b1-3")}, "is not a position in shard " + shards[0] + " of stream " + srv.StreamARN("orders") + ", which holds 49"},
		// Before, these two were accepted too: the emulators take any
		// number in the shard's range, and the records written next were
		// never read.
		{[]string{"--shard", shards[0], "--after-sequence", seqPlus(seqOf(got, "b0-9"), 80)}, "no record of shard " + shards[0] + " of stream " + srv.StreamARN("orders") + " has sequence number " + seqPlus(seqOf(got, "b0-9"), 80) + " (no record of the shard is at or after it"},
		{[]string{"--shard", shards[0], "--after-sequence", seqPlus(seqOf(got, "b0-4"), 1)}, "has sequence number " + seqPlus(seqOf(got, "b0-4"), 1) + " (the next record of the shard is " + seqOf(got, "b0-5") + ")"},
		{[]string{"--to-timestamp", "yesterday"}, "neither an RFC 3339 time nor a duration"},
		{[]string{"--to-timestamp", "2999-01-01T00:00:00Z"}, "expected a time between 2013-01-01T00:00:00Z (no Kinesis record is older) and a few minutes from now"},
		{[]string{"--to-latest", "--force"}, "--force applies to --table (or to --after-sequence) only"},
	} {
		if out, err := set(c.args...); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("set %v: %v, want an error saying %q:\n%s", c.args, err, c.want, out)
		}
	}

	// A number whose record passed the retention period is a position
	// still, as the input reads it (on from the oldest record left): the
	// service refuses it, and the shard's oldest record lies after it.
	if _, err := srv.TrimShard("orders", shards[1], 12); err != nil {
		t.Fatal(err)
	}
	if out, err := set("--shard", shards[1], "--after-sequence", seqOf(got, "b1-1")); err != nil || !strings.Contains(out, "Moved 1 shards") {
		t.Errorf("set --after-sequence of a trimmed record: %v\n%s", err, out)
	}
	// --force sets a number no record has, for whoever knows better.
	if out, err := set("--shard", shards[0], "--after-sequence", seqPlus(seqOf(got, "b0-4"), 1), "--force"); err != nil || !strings.Contains(out, "Moved 1 shards") {
		t.Errorf("set --after-sequence --force of a number between two records: %v\n%s", err, out)
	}
}

// seqPlus returns sequence number seq plus n.
func seqPlus(seq string, n int64) string {
	v, ok := new(big.Int).SetString(seq, 10)
	if !ok {
		return seq
	}
	return v.Add(v, big.NewInt(n)).String()
}

// seqOf returns the sequence number of the record with data.
func seqOf(got []inputtest.Got, data string) string {
	for _, g := range got {
		if g.Data == data {
			return g.Seq
		}
	}
	return ""
}

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestBrokenLeaseItemsAreReportedShownAndSet: six shards of a stream have
// lease items no instance writes: a leaseCounter of type S, a kind stored
// as a number, a checkpoint stored as a number, a second item under
// another leaseKey, SHARD_END on a shard listed open, and an item of another
// schema at the shard's key; a seventh shard is well-formed. Before, each of the four
// stopped its shard for good with one debug line ("another instance took
// the lease first") a second, or none, `checkpoint show` printed them as
// normal (or left them out), and `checkpoint set --force` failed "changed in
// the lease table ... (an instance is running)". Now the run reads the seventh
// shard and reports each of the six at ERROR with the attribute and the
// fix; show marks them BROKEN with the reason; set --force, while the run
// goes on, replaces them; and every record of every shard arrives once.
func TestBrokenLeaseItemsAreReportedShownAndSet(t *testing.T) {
	t.Parallel()
	bin, _, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 7))
	arn := srv.StreamARN("orders")
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("shardId-%012d", i)
		if err := srv.PutToShard("orders", id, 4, func(j int) []byte { return fmt.Appendf(nil, "r%d-%d", i, j) }); err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			want = append(want, fmt.Sprintf("r%d-%d", i, j))
		}
	}
	d := emulator.Dynalite(t)
	if _, err := lease.Open(t.Context(), d.Client(), "leases", true); err != nil {
		t.Fatal(err)
	}
	S := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	N := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	item := func(shard int, key string, changes map[string]types.AttributeValue) {
		id := fmt.Sprintf("shardId-%012d", shard)
		if key == "" {
			key = lease.ShardKey(arn, id)
		}
		it := map[string]types.AttributeValue{"leaseKey": S(key), "kind": S("shard"), "streamArn": S(arn), "shardId": S(id),
			"leaseCounter": N("3"), "startKind": S("TRIM_HORIZON")}
		maps.Copy(it, changes)
		if _, err := d.Client().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	item(0, "", map[string]types.AttributeValue{"leaseCounter": S("abc")})
	item(1, "", map[string]types.AttributeValue{"kind": N("1")})
	item(2, "", map[string]types.AttributeValue{"checkpoint": N("4959")})
	item(3, "copy-of-shard-3", nil)
	item(4, "", map[string]types.AttributeValue{"checkpoint": S("SHARD_END")})
	// Another program's item at shard 5's key: no streamArn, so no scan of
	// the stream sees it.
	if _, err := d.Client().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: map[string]types.AttributeValue{
		"leaseKey": S(lease.ShardKey(arn, "shardId-000000000005")), "owner": S("another-app"), "version": N("7")}}); err != nil {
		t.Fatal(err)
	}

	p := startPipeline(t, bin, srv, ca, "dynamodb: { table: leases, endpoint: '"+d.Endpoint+"', lease_period: 2s }", "broken-run")
	waitLinesOrLog(t, p, 4)
	reports := map[int]string{0: "leaseCounter", 1: "attribute kind", 2: "attribute checkpoint", 3: "second item of shard", 4: "SHARD_END), but the service lists it open", 5: "attribute kind is missing"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, _ := os.ReadFile(p.log)
		missing := 0
		for i, attr := range reports {
			found := false
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(l, fmt.Sprintf("shard shardId-%012d: not read", i)) && strings.Contains(l, attr) &&
					strings.Contains(l, "level=error") && strings.Contains(l, "checkpoint set --table leases --dynamodb-endpoint "+d.Endpoint+" --stream "+arn+" --endpoint "+srv.Endpoint()+" --shard ") {
					found = true
				}
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 6 broken items not reported at ERROR within 30 s:\n%s", missing, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := readOutput(t, p.out); len(got) != 4 {
		t.Fatalf("read %d records while 6 shards are broken, want the 4 of the seventh", len(got))
	}

	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append(append([]string{"checkpoint"}, args...), "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--table", "leases", "--dynamodb-endpoint", d.Endpoint)...)
		cmd.Env = fakeAWSEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := cli("show")
	if err != nil {
		t.Fatalf("show: %v\n%s", err, out)
	}
	for i, attr := range reports {
		id := fmt.Sprintf("shardId-%012d", i)
		if !strings.Contains(out, id+"  BROKEN") || !strings.Contains(out, id+" is BROKEN") || !strings.Contains(out, attr) {
			t.Errorf("show does not mark %s BROKEN with %q:\n%s", id, attr, out)
		}
	}
	set := []string{"set", "--shard", "shardId-000000000000", "--shard", "shardId-000000000001", "--shard", "shardId-000000000002", "--shard", "shardId-000000000003", "--shard", "shardId-000000000004", "--shard", "shardId-000000000005", "--to-trim-horizon"}
	if out, err := cli(set...); err == nil || !strings.Contains(out, "give --force") {
		t.Fatalf("set while an instance runs, without --force: %v\n%s", err, out)
	}
	if out, err := cli(append(set, "--force")...); err != nil || !strings.Contains(out, "Moved 6 shards") {
		t.Fatalf("set --force: %v\n%s", err, out)
	}
	got := p.stopAfter(28)
	if d := datas(got); !sameSet(d, want) {
		t.Fatalf("after set --force the run read %v, want each of %v once", d, want)
	}
	if out, err := cli("show"); err != nil || strings.Contains(out, "BROKEN") {
		t.Fatalf("show after set --force: %v\n%s", err, out)
	}
}
