package lease

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

const arn = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"

func open(t *testing.T, d *emulator.DynamoDB, name string) *Table {
	t.Helper()
	tb, err := Open(t.Context(), d.Client(), name, true)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestFencing: every write of a holder is conditional on its owner and
// counter. Once another instance took the lease, the old holder's renewal,
// checkpoint and release fail with ErrLost and change nothing.
func TestFencing(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "fencing")
	ctx := t.Context()

	start := checkpoint.Start{Kind: "TRIM_HORIZON"}
	it, _, err := tb.Create(ctx, Shard{Stream: arn, ShardID: "shardId-000000000000", Checkpoint: checkpoint.Checkpoint{Start: start, ShardStart: "100"}, Parents: []string{"shardId-000000000009"}})
	if err != nil {
		t.Fatal(err)
	}
	// A second create keeps the first item.
	again, _, err := tb.Create(ctx, Shard{Stream: arn, ShardID: "shardId-000000000000", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "LATEST"}}})
	if err != nil || again.Checkpoint.Start.Kind != "TRIM_HORIZON" || again.Checkpoint.ShardStart != "100" || len(again.Parents) != 1 {
		t.Fatalf("second create: %+v, %v; want the first item", again, err)
	}

	a, err := tb.Take(ctx, it, "a", "")
	if err != nil || a.Owner != "a" || a.Counter != 1 {
		t.Fatalf("take by a: %+v, %v", a, err)
	}
	pos := &checkpoint.Position{Sequence: "105", SubSequence: 2, Partial: true}
	a, err = tb.Hold(ctx, arn, it.ShardID, "a", a.Counter, Write{Checkpoint: &checkpoint.Checkpoint{Position: pos}, KeepAsked: true})
	if err != nil || a.Counter != 2 || a.Checkpoint.Position == nil || *a.Checkpoint.Position != *pos {
		t.Fatalf("checkpoint by a: %+v, %v", a, err)
	}
	// b takes it as scanned (a's lease expired by b's clock).
	b, err := tb.Take(ctx, a, "b", "")
	if err != nil || b.Owner != "b" || b.Counter != 3 || *b.Checkpoint.Position != *pos {
		t.Fatalf("take by b: %+v, %v", b, err)
	}
	// a wakes up: every write of it fails and changes nothing.
	later := &checkpoint.Position{Sequence: "110"}
	for _, w := range []Write{
		{KeepAsked: true},
		{Checkpoint: &checkpoint.Checkpoint{Position: later}},
		{Checkpoint: &checkpoint.Checkpoint{Ended: true}, Release: true},
		{Release: true, HandOver: "c"},
	} {
		if _, err := tb.Hold(ctx, arn, it.ShardID, "a", a.Counter, w); !errors.Is(err, ErrLost) {
			t.Fatalf("write %+v of the old holder: %v, want ErrLost", w, err)
		}
	}
	// A take with a stale scan fails too.
	if _, err := tb.Take(ctx, a, "c", ""); !errors.Is(err, ErrLost) {
		t.Fatalf("take of a stale scan: %v, want ErrLost", err)
	}
	got, ok, err := tb.Get(ctx, arn, it.ShardID)
	if err != nil || !ok || got.Owner != "b" || got.Counter != 3 || *got.Checkpoint.Position != *pos {
		t.Fatalf("after the fenced writes: %+v, %v", got, err)
	}

	// c asks b for it; b's renewal sees the request, and its handover
	// writes the last checkpoint and makes c the owner.
	if err := tb.Ask(ctx, got, "c", ""); err != nil {
		t.Fatal(err)
	}
	if err := tb.Ask(ctx, got, "d", ""); !errors.Is(err, ErrLost) {
		t.Fatalf("a second ask: %v, want ErrLost", err)
	}
	b, err = tb.Hold(ctx, arn, it.ShardID, "b", got.Counter, Write{KeepAsked: true})
	if err != nil || b.HandoffTo != "c" {
		t.Fatalf("renewal of b: %+v, %v; want the request of c", b, err)
	}
	b, err = tb.Hold(ctx, arn, it.ShardID, "b", b.Counter, Write{Checkpoint: &checkpoint.Checkpoint{Position: later}, Release: true, HandOver: "c"})
	if err != nil || b.Owner != "c" || b.HandoffTo != "" || b.Checkpoint.Position.Sequence != "110" {
		t.Fatalf("handover: %+v, %v", b, err)
	}
	// The end is stored as SHARD_END, and the lease freed.
	c, err := tb.Take(ctx, b, "c", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err = tb.Hold(ctx, arn, it.ShardID, "c", c.Counter, Write{Checkpoint: &checkpoint.Checkpoint{Ended: true}, Release: true})
	if err != nil || c.Owner != "" || !c.Checkpoint.Ended {
		t.Fatalf("end: %+v, %v", c, err)
	}
	raw, err := d.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("fencing"), Key: map[string]types.AttributeValue{attrKey: str(it.Key())}})
	if err != nil {
		t.Fatal(err)
	}
	if v := getS(raw.Item, attrCheckpoint); v != "SHARD_END" {
		t.Fatalf("checkpoint attribute %q, want SHARD_END", v)
	}
	if err := tb.Delete(ctx, arn, it.ShardID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tb.Get(ctx, arn, it.ShardID); ok {
		t.Fatal("the item of a finished, free shard was not deleted")
	}
}

// TestScanReadsEveryPage: a scan reads to the last page (Redpanda Connect
// and Bento read only the first), and keeps other streams' items out.
func TestScanReadsEveryPage(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	ctx := t.Context()
	tb := open(t, d, "pages")
	paged := &Table{api: limited{API: d.Client(), limit: 7}, name: "pages"}
	other := strings.Replace(arn, "orders", "payments", 1)
	for i := range 40 {
		for _, s := range []string{arn, other} {
			if _, _, err := tb.Create(ctx, Shard{Stream: s, ShardID: shardID(i), Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "n1"}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.PutStream(ctx, Stream{ARN: arn, Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}); err != nil {
		t.Fatal(err)
	}
	sc, err := paged.Scan(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Shards) != 40 || len(sc.Workers) != 1 || sc.Stream == nil {
		t.Fatalf("scan: %d shards, %d workers, stream %v; want 40, 1, set", len(sc.Shards), len(sc.Workers), sc.Stream)
	}
	for _, s := range sc.Shards {
		if s.Stream != arn {
			t.Fatalf("scan of %s returned an item of %s", arn, s.Stream)
		}
	}
}

// limited makes every scan page hold at most limit items.
type limited struct {
	API
	limit int32
}

func (l limited) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	in.Limit = aws.Int32(l.limit)
	return l.API.Scan(ctx, in, o...)
}

func shardID(i int) string {
	return "shardId-" + strings.Repeat("0", 10) + string(rune('a'+i/26)) + string(rune('a'+i%26))
}

// TestOpenErrors: a missing table without create, and a table of another
// key schema, are refused with errors that name the table and the fix.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	ctx := t.Context()
	_, err := Open(ctx, d.Client(), "missing", false)
	if err == nil || !strings.Contains(err.Error(), `"missing" does not exist`) || !strings.Contains(err.Error(), "create: true") {
		t.Fatalf("missing table: %v", err)
	}
	_, err = d.Client().CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("other"),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("at"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("at"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = Open(cctx, d.Client(), "other", true)
	if err == nil || !strings.Contains(err.Error(), `"other" has the key schema [HASH id, RANGE at]`) || !strings.Contains(err.Error(), "leaseKey (string)") {
		t.Fatalf("wrong key schema: %v", err)
	}
}

// TestAccessDeniedNamesActions: access denied names the table and the IAM
// actions the input needs.
func TestAccessDeniedNamesActions(t *testing.T) {
	t.Parallel()
	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: arn:aws:iam::123456789012:user/app is not authorized to perform: dynamodb:DescribeTable"}
	_, err := Open(t.Context(), deny{err: denied}, "leases", false)
	for _, want := range []string{`"leases"`, "access denied", "dynamodb:UpdateItem", "dynamodb:Scan", "not authorized"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("access denied: %v; want it to mention %q", err, want)
		}
	}
}

// deny fails every call with err.
type deny struct {
	API
	err error
}

func (d deny) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, d.err
}

// TestWithdrawnAsk: a stopping instance withdraws its ask, and a handover
// to it then fails with ErrWithdrawn, leaving the lease with its holder.
func TestWithdrawnAsk(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "withdraw")
	ctx := t.Context()
	it, _, err := tb.Create(ctx, Shard{Stream: arn, ShardID: "shardId-000000000001", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := tb.Take(ctx, it, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Ask(ctx, a, "b", ""); err != nil {
		t.Fatal(err)
	}
	if err := tb.Withdraw(ctx, a, "b"); err != nil {
		t.Fatal(err)
	}
	got, err := tb.Hold(ctx, arn, it.ShardID, "a", a.Counter, Write{Release: true, HandOver: "b"})
	if !errors.Is(err, ErrWithdrawn) || got.Owner != "a" || got.Counter != a.Counter {
		t.Fatalf("handover after the ask was withdrawn: %+v, %v; want ErrWithdrawn and the lease unchanged", got, err)
	}
	if _, err := tb.Hold(ctx, arn, it.ShardID, "a", a.Counter, Write{KeepAsked: true}); err != nil {
		t.Fatalf("renewal after a withdrawn handover: %v", err)
	}
}

// TestRetriedWriteIsApplied: a holder's write that was applied and sent
// again (the SDK retrying after a lost answer) fails its condition against
// itself; it is recognised by its write id and not taken as a lost lease.
// An earlier write of the same holder is not mistaken for it.
func TestRetriedWriteIsApplied(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	ctx := t.Context()
	tb := open(t, d, "retried")
	it, _, err := tb.Create(ctx, Shard{Stream: arn, ShardID: "shardId-000000000002", Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := tb.Take(ctx, it, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	twice := &Table{api: sendTwice{API: d.Client()}, name: "retried"}
	pos := &checkpoint.Position{Sequence: "120"}
	got, err := twice.Hold(ctx, arn, it.ShardID, "a", a.Counter, Write{Checkpoint: &checkpoint.Checkpoint{Position: pos}, KeepAsked: true})
	if err != nil || got.Counter != a.Counter+1 || *got.Checkpoint.Position != *pos {
		t.Fatalf("a write sent twice: %+v, %v; want it applied once", got, err)
	}
	// A renewal at the old counter is not this write: the lease moved on.
	if _, err := tb.Hold(ctx, arn, it.ShardID, "a", a.Counter, Write{KeepAsked: true}); !errors.Is(err, ErrLost) {
		t.Fatalf("a write at a counter an earlier write moved: %v, want ErrLost", err)
	}
}

// sendTwice sends every UpdateItem twice and answers with the second result.
type sendTwice struct{ API }

func (s sendTwice) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := s.API.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return s.API.UpdateItem(ctx, in, o...)
}

// TestOverwriteFencesTheHolder: an operator's overwrite (checkpoint set or
// import) frees the lease and moves the counter, so a holder still running
// cannot write over the new position; an overwrite based on a stale read,
// or of an item that appeared since, changes nothing.
func TestOverwriteFencesTheHolder(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "overwrite")
	ctx := t.Context()
	const id = "shardId-000000000000"
	fresh := Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, ShardStart: "100"}}
	if err := tb.Overwrite(ctx, fresh, nil); err != nil {
		t.Fatalf("overwrite of an absent item: %v", err)
	}
	if err := tb.Overwrite(ctx, fresh, nil); !errors.Is(err, ErrLost) {
		t.Fatalf("overwrite of an item that appeared since: %v, want ErrLost", err)
	}
	it, _, err := tb.Get(ctx, arn, id)
	if err != nil {
		t.Fatal(err)
	}
	held, err := tb.Take(ctx, it, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	rewind := fresh
	rewind.Checkpoint.Position = &checkpoint.Position{Sequence: "150"}
	if err := tb.Overwrite(ctx, rewind, &it); !errors.Is(err, ErrLost) {
		t.Fatalf("overwrite based on a read from before the take: %v, want ErrLost", err)
	}
	if err := tb.Overwrite(ctx, rewind, &held); err != nil {
		t.Fatalf("overwrite of a held item: %v", err)
	}
	late := &checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: "199"}}
	if _, err := tb.Hold(ctx, arn, id, "a", held.Counter, Write{Checkpoint: late}); !errors.Is(err, ErrLost) {
		t.Fatalf("the old holder's checkpoint after the overwrite: %v, want ErrLost", err)
	}
	got, _, err := tb.Get(ctx, arn, id)
	if err != nil || got.Owner != "" || got.Counter != held.Counter+1 || got.Checkpoint.Position == nil || got.Checkpoint.Position.Sequence != "150" {
		t.Fatalf("after the overwrite: %+v, %v; want free at counter %d, position 150", got, err, held.Counter+1)
	}
}

// TestReplaceContinuesTheCounter: the item that replaces a shard of an
// earlier stream continues its counter. Before, it restarted at 0: once
// the old holder took the new item (counter 1), a write still in flight
// for its old lease, at counter 1, passed its condition and wrote the old
// stream's checkpoint over the new shard.
func TestReplaceContinuesTheCounter(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "replace")
	ctx := t.Context()
	const id = "shardId-000000000003"
	start := checkpoint.Start{Kind: "TRIM_HORIZON"}
	old, _, err := tb.Create(ctx, Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: start, ShardStart: "100"}})
	if err != nil {
		t.Fatal(err)
	}
	held, err := tb.Take(ctx, old, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	fresh := Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: start, ShardStart: "300"}}
	if err := tb.Replace(ctx, fresh, "100"); err != nil {
		t.Fatal(err)
	}
	got, _, err := tb.Get(ctx, arn, id)
	if err != nil || got.Owner != "" || got.Counter != held.Counter+1 || got.Checkpoint.ShardStart != "300" {
		t.Fatalf("after the replace: %+v, %v; want free at counter %d, start 300", got, err, held.Counter+1)
	}
	if _, err := tb.Take(ctx, got, "a", ""); err != nil {
		t.Fatal(err)
	}
	stale := &checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: "150"}}
	if _, err := tb.Hold(ctx, arn, id, "a", held.Counter, Write{Checkpoint: stale}); !errors.Is(err, ErrLost) {
		t.Fatalf("a write of the old lease after the new item was taken: %v, want ErrLost", err)
	}
	// A replace of a start that is gone writes nothing.
	if err := tb.Replace(ctx, Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: start, ShardStart: "400"}}, "100"); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := tb.Get(ctx, arn, id); again.Checkpoint.ShardStart != "300" || again.Owner != "a" {
		t.Fatalf("a replace of a start that is gone: %+v; want the item unchanged", again)
	}
}

// TestReplaceRace: Replace reads the old item and writes conditional on its
// start and counter. A write of the holder between the two is read again and
// continued; a replace by someone else between the two wins.
func TestReplaceRace(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "replacerace")
	ctx := t.Context()
	start := checkpoint.Start{Kind: "TRIM_HORIZON"}
	shard := func(id, shardStart string) Shard {
		return Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: start, ShardStart: shardStart}}
	}

	held, _, err := tb.Create(ctx, shard("shardId-000000000004", "100"))
	if err == nil {
		held, err = tb.Take(ctx, held, "a", "")
	}
	if err != nil {
		t.Fatal(err)
	}
	renewed := &beforePut{API: d.Client(), hook: func() {
		if _, err := tb.Hold(ctx, arn, held.ShardID, "a", held.Counter, Write{}); err != nil {
			t.Error(err)
		}
	}}
	if err := (&Table{api: renewed, name: "replacerace"}).Replace(ctx, shard(held.ShardID, "300"), "100"); err != nil {
		t.Fatal(err)
	}
	got, _, err := tb.Get(ctx, arn, held.ShardID)
	if err != nil || got.Owner != "" || got.Counter != held.Counter+2 || got.Checkpoint.ShardStart != "300" {
		t.Fatalf("replace raced by a renewal: %+v, %v; want free at counter %d, start 300", got, err, held.Counter+2)
	}

	if _, _, err := tb.Create(ctx, shard("shardId-000000000005", "100")); err != nil {
		t.Fatal(err)
	}
	replaced := &beforePut{API: d.Client(), hook: func() {
		if err := tb.Replace(ctx, shard("shardId-000000000005", "200"), "100"); err != nil {
			t.Error(err)
		}
	}}
	if err := (&Table{api: replaced, name: "replacerace"}).Replace(ctx, shard("shardId-000000000005", "300"), "100"); err != nil {
		t.Fatal(err)
	}
	got, _, err = tb.Get(ctx, arn, "shardId-000000000005")
	if err != nil || got.Counter != 1 || got.Checkpoint.ShardStart != "200" {
		t.Fatalf("replace raced by another replace: %+v, %v; want the other's item, start 200 at counter 1", got, err)
	}
}

// beforePut runs hook once, before its first PutItem is sent: another
// writer racing a read-then-write.
type beforePut struct {
	API
	once sync.Once
	hook func()
}

func (b *beforePut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	b.once.Do(b.hook)
	return b.API.PutItem(ctx, in, o...)
}

// TestHeartbeatNonce: a worker item carries the nonce of the process that
// renews it. A second process started with the same instance id gets
// ErrDuplicateInstance and changes nothing, until it takes the presence
// over; an item written before nonces were takes the first nonce written.
func TestHeartbeatNonce(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "nonce")
	ctx := t.Context()
	if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "first"}, false); err != nil {
		t.Fatal(err)
	}
	if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "first"}, false); err != nil {
		t.Fatal(err)
	}
	if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "second"}, false); !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("heartbeat of a second process with the same instance id: %v, want ErrDuplicateInstance", err)
	}
	w, ok, err := tb.GetWorker(ctx, arn, "a")
	if err != nil || !ok || !reflect.DeepEqual(w, Worker{ID: "a", Counter: counterBase(Presence{Nonce: "first"}) + 2, Nonce: "first", Held: map[string]bool{}, Listed: true}) {
		t.Fatalf("after the refused heartbeat: %+v, %v, %v; want counter 2, nonce first", w, ok, err)
	}
	if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "second"}, true); err != nil {
		t.Fatal(err)
	}
	if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "first"}, false); !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("heartbeat of the process whose presence was taken over: %v, want ErrDuplicateInstance", err)
	}
	sc, err := tb.ScanConsistent(ctx, arn)
	if err != nil || len(sc.Workers) != 1 || !reflect.DeepEqual(sc.Workers[0], Worker{ID: "a", Counter: counterBase(Presence{Nonce: "first"}) + 3, Nonce: "second", Held: map[string]bool{}, Listed: true}) {
		t.Fatalf("scan after the take-over: %+v, %v; want a at counter 3, nonce second", sc.Workers, err)
	}

	// The item of an instance of a version without nonces.
	_, err = d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("nonce"), Item: map[string]types.AttributeValue{
		attrKey: str(workerKey(arn, "old")), attrKind: str(kindWorker), attrStream: str(arn), attrOwner: str("old"), attrCounter: num(7),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Heartbeat(ctx, arn, "old", Presence{Nonce: "new"}, false); err != nil {
		t.Fatalf("heartbeat on an item without a nonce: %v", err)
	}
	if w, _, _ := tb.GetWorker(ctx, arn, "old"); !reflect.DeepEqual(w, Worker{ID: "old", Counter: 8, Nonce: "new", Held: map[string]bool{}, Listed: true}) {
		t.Fatalf("item without a nonce after a heartbeat: %+v; want counter 8, nonce new", w)
	}
}

// TestRemoveWorker: the presence of an expired instance is removed only
// while its counter is the one seen expiring; a missing item, or one that
// moved on, is no error.
func TestRemoveWorker(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	tb := open(t, d, "removeworker")
	ctx := t.Context()
	if _, ok, err := tb.GetWorker(ctx, arn, "a"); ok || err != nil {
		t.Fatalf("worker never written: %v, %v; want none", ok, err)
	}
	if removed, err := tb.RemoveWorker(ctx, arn, Worker{ID: "a", Counter: 1}); err != nil || removed {
		t.Fatalf("remove of a missing worker: %v, %v; want false, nil", removed, err)
	}
	for range 2 {
		if err := tb.Heartbeat(ctx, arn, "a", Presence{Nonce: "n"}, false); err != nil {
			t.Fatal(err)
		}
	}
	base := counterBase(Presence{Nonce: "n"})
	if removed, err := tb.RemoveWorker(ctx, arn, Worker{ID: "a", Counter: base + 1}); err != nil || removed {
		t.Fatalf("remove at a counter the worker moved past: %v, %v; want false, nil", removed, err)
	}
	if _, ok, _ := tb.GetWorker(ctx, arn, "a"); !ok {
		t.Fatal("a worker that moved on was removed")
	}
	if removed, err := tb.RemoveWorker(ctx, arn, Worker{ID: "a", Counter: base + 2}); err != nil || !removed {
		t.Fatalf("remove at its counter: %v, %v; want true, nil", removed, err)
	}
	if _, ok, _ := tb.GetWorker(ctx, arn, "a"); ok {
		t.Fatal("an expired worker was not removed")
	}
}

// TestReplaceMalformedItem: a shard item whose leaseCounter is the string
// "abc" (so that no write conditional on a counter can match it) and a
// second item of the shard are replaced and deleted by ReplaceMalformed, on
// the table as on Memory; one changed since it was read is not. Before,
// an operator's overwrite of such an item failed for ever with "changed in
// the lease table while being written (an instance is running)".
func TestReplaceMalformedItem(t *testing.T) {
	t.Parallel()
	const id = "shardId-000000000000"
	d := emulator.Dynalite(t)
	tb := open(t, d, "malformed")
	m := NewMemory()
	put := func(t *testing.T, st Store, item map[string]types.AttributeValue) {
		t.Helper()
		if st == Store(m) {
			m.SetItem(item)
			return
		}
		if _, err := d.Client().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("malformed"), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []Store{tb, m} {
		t.Run(st.Name(), func(t *testing.T) {
			ctx := t.Context()
			bad := encodeShard(Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
			bad[attrCounter] = str("abc")
			stray := encodeShard(Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
			stray[attrKey] = str("stray-" + id)
			put(t, st, bad)
			put(t, st, stray)
			sc, err := st.ScanConsistent(ctx, arn)
			if err != nil || len(sc.Broken) != 2 {
				t.Fatalf("scan: broken %+v, %v; want 2", sc.Broken, err)
			}
			want := Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Position: &checkpoint.Position{Sequence: "42"}}}
			changed := maps.Clone(bad)
			changed[attrCounter] = str("abd")
			put(t, st, changed)
			for _, b := range sc.Broken {
				if b.Key == ShardKey(arn, id) {
					if err := st.ReplaceMalformed(ctx, b, &want); !errors.Is(err, ErrLost) {
						t.Fatalf("replace of an item changed since: %v, want ErrLost", err)
					}
				}
			}
			sc, _ = st.ScanConsistent(ctx, arn)
			for _, b := range sc.Broken {
				var err error
				if b.Key == ShardKey(arn, id) {
					err = st.ReplaceMalformed(ctx, b, &want)
				} else {
					err = st.ReplaceMalformed(ctx, b, nil)
				}
				if err != nil {
					t.Fatalf("replacing %s: %v", b.Key, err)
				}
			}
			sc, err = st.ScanConsistent(ctx, arn)
			if err != nil || len(sc.Broken) != 0 || len(sc.Shards) != 1 || sc.Shards[0].Checkpoint.Position == nil || sc.Shards[0].Checkpoint.Position.Sequence != "42" {
				t.Fatalf("after: shards %+v, broken %+v, %v", sc.Shards, sc.Broken, err)
			}
		})
	}
}

// TestEmptyOwnerIsFree: a shard item whose leaseOwner is "" (a hand edit,
// another tool) is a free lease: the scan shows it without an owner, a take
// succeeds and a delete of the shard's item goes through. Before, the take
// was conditional on the attribute's absence, so the lease was never taken
// and its shard never read, with a line at DEBUG only.
func TestEmptyOwnerIsFree(t *testing.T) {
	t.Parallel()
	const id = "shardId-000000000000"
	d := emulator.Dynalite(t)
	tb := open(t, d, "emptyowner")
	m := NewMemory()
	for _, st := range []Store{tb, m} {
		t.Run(st.Name(), func(t *testing.T) {
			ctx := t.Context()
			for _, shardID := range []string{id, "shardId-000000000001"} {
				item := encodeShard(Shard{Stream: arn, ShardID: shardID, Counter: 7, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}})
				item[attrOwner] = str("")
				if st == Store(m) {
					m.SetItem(item)
				} else if _, err := d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("emptyowner"), Item: item}); err != nil {
					t.Fatal(err)
				}
			}
			sc, err := st.ScanConsistent(ctx, arn)
			if err != nil || len(sc.Broken) != 0 || len(sc.Shards) != 2 {
				t.Fatalf("scan: shards %+v, broken %+v, %v", sc.Shards, sc.Broken, err)
			}
			for _, s := range sc.Shards {
				if s.Owner != "" {
					t.Fatalf("shard %s scanned with owner %q, want none", s.ShardID, s.Owner)
				}
				if s.ShardID != id {
					if err := st.Delete(ctx, arn, s.ShardID); err != nil {
						t.Fatal(err)
					}
					continue
				}
				got, err := st.Take(ctx, s, "w1", "n1")
				if err != nil || got.Owner != "w1" || got.Counter != 8 {
					t.Fatalf("take of a lease with an empty owner: %+v, %v; want w1 at counter 8", got, err)
				}
			}
			sc, err = st.ScanConsistent(ctx, arn)
			if err != nil || len(sc.Shards) != 1 || sc.Shards[0].ShardID != id || sc.Shards[0].Owner != "w1" {
				t.Fatalf("after: shards %+v, %v; want only %s, held by w1 (the other deleted)", sc.Shards, err, id)
			}
		})
	}
}
