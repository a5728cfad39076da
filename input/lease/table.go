// Package lease is the DynamoDB lease table that lets several instances of
// the input share the shards of a stream: one item per shard holding its
// owner, a lease counter, its checkpoint, its parents and whether it was
// read to its end; one item per stream holding what every instance must
// agree on; one item per live instance and stream.
//
// Every write of a lease holder (renewal, checkpoint, release, handoff) is
// conditional on the owner and the lease counter it last wrote: once anyone
// else took the lease, the write fails with ErrLost and changes nothing.
// This package only reads and writes the table; who takes what, and when a
// lease counts as expired, is the input's policy.
//
// Store is the method set the input uses: *Table serves it from DynamoDB,
// *Memory from memory with the same semantics, for tests without an
// emulator.
package lease

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// ErrLost is returned by a conditional write whose condition failed: the
// lease is no longer the writer's (or, for a take, no longer as scanned).
var ErrLost = errors.New("the lease is no longer held as written")

// ErrLaterStream is returned by Replace when the item is of a stream created
// after the one the caller knows: the caller's listing is behind (the
// stream was deleted and created again since it listed), not the item.
var ErrLaterStream = errors.New("the item is of a stream created later")

// ErrWithdrawn is returned by a handover whose taker withdrew its ask
// meanwhile: the lease is still the writer's, unchanged.
var ErrWithdrawn = errors.New("the instance that asked for the lease withdrew its ask")

// ErrDuplicateInstance is returned by a heartbeat whose instance's presence
// was written by another process, with another nonce: two processes share
// one instance_id, and each would take the other's leases for its own.
var ErrDuplicateInstance = errors.New("another process renews the presence of this instance (another nonce): two processes share one instance_id; give each its own")

// API is the part of the DynamoDB client the table uses.
type API interface {
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Table is a lease table.
type Table struct {
	api  API
	name string

	mu sync.Mutex
	// rosters is how many roster items each stream had at its last poll;
	// owed the streams whose change counter a failed announcement owes a
	// move (see announce).
	rosters map[string]int
	owed    map[string]bool
}

func newTable(api API, name string) *Table {
	return &Table{api: api, name: name, rosters: map[string]int{}, owed: map[string]bool{}}
}

// Actions are the IAM actions the input needs on the table.
const Actions = "dynamodb:DescribeTable, dynamodb:Scan, dynamodb:GetItem, dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem (and dynamodb:CreateTable with create: true)"

// Open checks that the table exists with the key schema of a lease table
// (creating it, on-demand, when create is set and it is missing) and waits
// until it is ACTIVE. Errors name the table and what to do.
func Open(ctx context.Context, api API, name string, create bool) (*Table, error) {
	t := newTable(api, name)
	for attempt := 0; ; attempt++ {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var missing *types.ResourceNotFoundException
		switch {
		case errors.As(err, &missing) && create && attempt == 0:
			if err := t.create(ctx); err != nil {
				return nil, err
			}
			continue
		case errors.As(err, &missing):
			if attempt > 0 {
				break // created by us and not described yet
			}
			return nil, missingTable(name)
		case err != nil:
			return nil, t.fail("describing", err)
		default:
			if err := checkSchema(name, out.Table); err != nil {
				return nil, err
			}
			if out.Table.TableStatus == types.TableStatusActive || out.Table.TableStatus == types.TableStatusUpdating {
				return t, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("DynamoDB table %q: waiting for it to become ACTIVE: %w", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Check reports, with one DescribeTable call, what keeps the table from
// serving whatever happens next: access denied, a missing table that create
// is off for, a key schema of another kind of table. Any other failure
// (no network yet, throttling) is no answer, and Check returns nil: Open,
// retried, meets it.
func Check(ctx context.Context, api API, name string, create bool) error {
	t := newTable(api, name)
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		if create {
			return nil
		}
		return missingTable(name)
	case err != nil:
		if code := awserr.Code(err); code == "AccessDeniedException" || code == "UnrecognizedClientException" {
			return t.fail("describing", err)
		}
		return nil
	}
	return checkSchema(name, out.Table)
}

// ErrNoTable is the error of a lease table that does not exist, opened
// without create.
var ErrNoTable = errors.New("does not exist")

func missingTable(name string) error {
	return fmt.Errorf("DynamoDB table %q %w: create it with the hash key %s (string), or set create: true to let the input create it", name, ErrNoTable, attrKey)
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

func (t *Table) create(ctx context.Context) error {
	_, err := t.api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(t.name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // another instance creates it
		return t.fail("creating", err)
	}
	return nil
}

// checkSchema refuses a table whose key is not a lone string hash key named
// leaseKey: its items could not be ours.
func checkSchema(name string, desc *types.TableDescription) error {
	want := fmt.Sprintf("the hash key %s (string) and no sort key", attrKey)
	if len(desc.KeySchema) != 1 || aws.ToString(desc.KeySchema[0].AttributeName) != attrKey || desc.KeySchema[0].KeyType != types.KeyTypeHash {
		var got []string
		for _, k := range desc.KeySchema {
			got = append(got, fmt.Sprintf("%s %s", k.KeyType, aws.ToString(k.AttributeName)))
		}
		return fmt.Errorf("DynamoDB table %q has the key schema [%s], but a lease table needs %s: name another table, or let the input create one", name, strings.Join(got, ", "), want)
	}
	for _, d := range desc.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == attrKey && d.AttributeType != types.ScalarAttributeTypeS {
			return fmt.Errorf("DynamoDB table %q has %s of type %s, but a lease table needs %s", name, attrKey, d.AttributeType, want)
		}
	}
	return nil
}

// fail wraps an error of a table call with the table's name and, for access
// denied, the IAM actions the input needs.
func (t *Table) fail(what string, err error) error {
	if code := awserr.Code(err); code == "AccessDeniedException" || code == "UnrecognizedClientException" {
		return fmt.Errorf("DynamoDB table %q: %s: access denied; the input needs %s on the table: %w", t.name, what, Actions, err)
	}
	return fmt.Errorf("DynamoDB table %q: %s: %w", t.name, what, err)
}

// Scan is what the table holds for one stream.
type Scan struct {
	Stream  *Stream // nil when the stream has no item yet
	Shards  []Shard
	Workers []Worker
	// Broken holds the items of the stream that are not well-formed shard
	// items: no shard they name may be read until they are set again.
	Broken []BrokenItem
}

// BrokenItem is an item of a stream that cannot be read as a shard's item.
type BrokenItem struct {
	Key string // its leaseKey
	// ShardID is the shard it names (or the shard of the key), empty when
	// neither says.
	ShardID string
	// Item is the item as read.
	Item map[string]types.AttributeValue
	// Err names the table, the item, the attribute, its value and what
	// was expected.
	Err error
}

// BrokenShards returns the shards that broken items name, each once.
func (sc Scan) BrokenShards() map[string][]BrokenItem {
	out := map[string][]BrokenItem{}
	for _, b := range sc.Broken {
		if b.ShardID != "" {
			out[b.ShardID] = append(out[b.ShardID], b)
		}
	}
	return out
}

// add decodes an item of the scanned stream into sc by its kind; items of
// other kinds (registrations) are left out. A shard item that does not
// decode, or an item of no kind this input writes, is kept in Broken.
func (sc *Scan) add(item map[string]types.AttributeValue) error {
	kind, isS := item[attrKind].(*types.AttributeValueMemberS)
	if !isS || !slices.Contains([]string{kindShard, kindStream, kindWorker, kindRegistration}, kind.Value) {
		key := getS(item, attrKey)
		sc.Broken = append(sc.Broken, BrokenItem{Key: key, ShardID: shardOfItem(item), Item: item,
			Err: attrError(key, attrKind, item[attrKind], `S (one of "shard", "stream", "worker", "registration")`)})
		return nil
	}
	switch kind.Value {
	case kindShard:
		s, err := decodeShard(item)
		if err != nil {
			sc.Broken = append(sc.Broken, BrokenItem{Key: getS(item, attrKey), ShardID: shardOfItem(item), Item: item, Err: err})
			return nil
		}
		sc.Shards = append(sc.Shards, s)
	case kindStream:
		s, err := decodeStream(item)
		if err != nil {
			return err
		}
		sc.Stream = &s
	case kindWorker:
		sc.Workers = append(sc.Workers, decodeWorker(item))
	}
	return nil
}

// Scan reads every item of a stream, to the last page.
func (t *Table) Scan(ctx context.Context, streamARN string) (Scan, error) {
	return t.scan(ctx, streamARN, false)
}

// ScanConsistent is Scan with strongly consistent reads: every write that
// succeeded before it is seen.
func (t *Table) ScanConsistent(ctx context.Context, streamARN string) (Scan, error) {
	return t.scan(ctx, streamARN, true)
}

func (t *Table) scan(ctx context.Context, streamARN string, consistent bool) (Scan, error) {
	var out Scan
	in := &dynamodb.ScanInput{
		ConsistentRead:            aws.Bool(consistent),
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		FilterExpression:          aws.String("#s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": attrStream},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(streamARN)},
	}
	for {
		page, err := t.api.Scan(ctx, in)
		if err != nil {
			return Scan{}, t.fail("scanning", err)
		}
		for _, item := range page.Items {
			if err := out.add(item); err != nil {
				return Scan{}, fmt.Errorf("DynamoDB table %q: %w", t.name, err)
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			for i := range out.Broken {
				out.Broken[i].Err = fmt.Errorf("DynamoDB table %q: %w", t.name, out.Broken[i].Err)
			}
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Get reads the item of a shard, strongly consistent; ok is false when
// there is none.
func (t *Table) Get(ctx context.Context, streamARN, shardID string) (s Shard, ok bool, err error) {
	s, ok, _, err = t.get(ctx, streamARN, shardID)
	return s, ok, err
}

func (t *Table) get(ctx context.Context, streamARN, shardID string) (s Shard, ok bool, raw map[string]types.AttributeValue, err error) {
	raw, err = t.getItem(ctx, ShardKey(streamARN, shardID), "reading shard "+shardID)
	if err != nil || raw == nil {
		return Shard{}, false, nil, err
	}
	s, err = decodeShard(raw)
	if err != nil {
		return Shard{}, false, nil, fmt.Errorf("DynamoDB table %q: %w", t.name, err)
	}
	return s, true, raw, nil
}

// getItem reads the item of key, strongly consistent: nil when there is
// none. what names the read in an error.
func (t *Table) getItem(ctx context.Context, key, what string) (map[string]types.AttributeValue, error) {
	return t.readItem(ctx, key, true, what)
}

// readItem reads the item of key: nil when there is none.
func (t *Table) readItem(ctx context.Context, key string, consistent bool, what string) (map[string]types.AttributeValue, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              aws.String(t.name),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		Key:                    map[string]types.AttributeValue{attrKey: str(key)},
		ConsistentRead:         aws.Bool(consistent),
	})
	if err != nil {
		return nil, t.fail(what, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// Create writes the item of a new, free shard unless one exists; it returns
// the item that is in the table afterwards (ours or the existing one), and
// whether it wrote it. It announces nothing: the creator announces what it
// created (Announce), once for all the shards of a listing.
func (t *Table) Create(ctx context.Context, s Shard) (got Shard, created bool, err error) {
	s.Owner, s.Counter, s.HandoffTo = "", 0, ""
	existing, err := t.putNew(ctx, encodeShard(s), "creating the item of shard "+s.ShardID)
	if err != nil || existing == nil {
		return s, err == nil, err
	}
	got, err = decodeShard(existing)
	if err != nil {
		return Shard{}, false, fmt.Errorf("DynamoDB table %q: %w", t.name, err)
	}
	return got, false, nil
}

// putNew writes item unless an item of its key exists, and returns that
// item (nil when item was written).
func (t *Table) putNew(ctx context.Context, item map[string]types.AttributeValue, what string) (map[string]types.AttributeValue, error) {
	for {
		_, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                aws.String(t.name),
			ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
			Item:                     item,
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": attrKey},
		})
		if err == nil {
			return nil, nil
		}
		if !conditionFailed(err) {
			return nil, t.fail(what, err)
		}
		existing, err := t.getItem(ctx, getS(item, attrKey), what)
		if err != nil || existing != nil {
			return existing, err
		}
		// Deleted in between: write it again.
	}
}

// Write is a write of a lease holder.
type Write struct {
	// Checkpoint, when set, is stored (position, or end).
	Checkpoint *checkpoint.Checkpoint
	// Release gives the lease up: to HandOver, or free when that is empty.
	Release  bool
	HandOver string
	// HandOverNonce is the nonce of the process of HandOver that asked
	// (Shard.HandoffNonce): the handover is made only while that process
	// still asks, and the lease becomes that process's. Empty: an ask
	// written without a nonce.
	HandOverNonce string
	// KeepAsked leaves a handoff request in place (a renewal, a
	// checkpoint). A write without it removes any ask and moves the
	// stream's change counter (an asker reads that its ask is gone), as a
	// release does.
	KeepAsked bool
	// ID names this write in the item (lastWriteId); empty: Hold makes
	// one. After, when set, is the ID of this holder's last write whose
	// answer never came (a time-out, a broken connection): this write then
	// applies at the counter after the one it names too, if that write is
	// the item's last (it was applied), so that one late answer does not
	// make every later write fail against the holder's own. A write applied
	// after a later one of the holder's (sent earlier, held up on its way)
	// never matches: the item's last write is then the later one. A take
	// removes the last write's ID.
	ID    string
	After string
}

// NewWriteID returns a random ID for a write (Write.ID).
func NewWriteID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Hold writes as the holder of a shard's lease: owner me at counter (or
// at the next one, see Write.After). It moves the counter by one, and
// returns the item as written. A condition that fails (the lease was taken)
// returns ErrLost and changes nothing.
func (t *Table) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w Write) (Shard, error) {
	names := map[string]string{"#o": attrOwner, "#c": attrCounter}
	values := map[string]types.AttributeValue{":me": str(me), ":c": num(counter), ":one": num(1)}
	// A token of this write tells it apart from an earlier write of the
	// same holder when its answer is lost (see applied).
	token := cmp.Or(w.ID, NewWriteID())
	names["#w"] = attrWriteID
	values[":w"] = str(token)
	sets := []string{"#c = #c + :one", "#w = :w"}
	var removes []string
	if w.Checkpoint != nil {
		set, remove := checkpointValues(*w.Checkpoint)
		i := 0
		for k, v := range set {
			i++
			n, vn := fmt.Sprintf("#a%d", i), fmt.Sprintf(":a%d", i)
			names[n], values[vn] = k, v
			sets = append(sets, n+" = "+vn)
		}
		for _, k := range remove {
			i++
			n := fmt.Sprintf("#a%d", i)
			names[n] = k
			removes = append(removes, n)
		}
	}
	if !w.KeepAsked {
		names["#h"], names["#hn"] = attrHandoffTo, attrHandoffNonce
		removes = append(removes, "#h", "#hn")
	}
	cond := "#o = :me AND #c = :c"
	if w.After != "" {
		values[":next"], values[":after"] = num(counter+1), str(w.After)
		cond = "#o = :me AND (#c = :c OR (#c = :next AND #w = :after))"
	}
	if w.Release {
		names["#on"] = attrOwnerNonce
		switch {
		case w.HandOver != "":
			// Only while the instance still asks for it: one that withdrew
			// its ask (it is stopping) must not be handed the lease, nor
			// may a later process of its name that did not ask.
			values[":to"] = str(w.HandOver)
			values[":true"] = &types.AttributeValueMemberBOOL{Value: true}
			names["#h"], names["#ho"] = attrHandoffTo, attrHandedOver
			sets = append(sets, "#o = :to", "#ho = :true")
			cond += " AND #h = :to"
			if w.HandOverNonce != "" {
				names["#hn"] = attrHandoffNonce
				values[":tonce"] = str(w.HandOverNonce)
				sets = append(sets, "#on = :tonce")
				cond += " AND #hn = :tonce"
			} else {
				removes = append(removes, "#on")
			}
		default:
			removes = append(removes, "#o", "#on")
		}
	}
	expr := "SET " + strings.Join(sets, ", ")
	if len(removes) > 0 {
		expr += " REMOVE " + strings.Join(removes, ", ")
	}
	out, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(ShardKey(streamARN, shardID))},
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if conditionFailed(err) {
		it, err := t.applied(ctx, streamARN, shardID, me, counter, w, token)
		if err == nil && !w.KeepAsked {
			t.announce(ctx, streamARN, shardID)
		}
		return it, err
	}
	if err != nil {
		return Shard{}, t.fail("writing the lease of shard "+shardID, err)
	}
	if !w.KeepAsked {
		t.announce(ctx, streamARN, shardID)
	}
	return decodeShard(out.Attributes)
}

// applied tells a write that lost its lease from one that was applied and
// then sent again by the SDK's retry (a response lost to a broken
// connection): the retry's condition fails against the write itself. The
// item as the write left it, with the next counter, is the write's; anything
// else is ErrLost.
func (t *Table) applied(ctx context.Context, streamARN, shardID, me string, counter int64, w Write, token string) (Shard, error) {
	it, ok, raw, err := t.get(ctx, streamARN, shardID)
	if err != nil {
		return Shard{}, err
	}
	owner := me
	if w.Release {
		owner = w.HandOver
	}
	last := getS(raw, attrWriteID)
	if ok && w.HandOver != "" && it.Owner == me && (it.Counter == counter || (w.After != "" && it.Counter == counter+1 && last == w.After)) &&
		(it.HandoffTo != w.HandOver || it.HandoffNonce != w.HandOverNonce) {
		return it, ErrWithdrawn
	}
	applied := it.Counter == counter+1 || (w.After != "" && it.Counter == counter+2)
	if !ok || it.Owner != owner || !applied || last != token {
		return Shard{}, ErrLost
	}
	return it, nil
}

// freeCondition holds for an item whose lease is free (#o: leaseOwner,
// :none: ""): no owner, or an empty one. An empty owner names no instance,
// so no one renews it and no one may hold it by it: it is free, as the scan
// reads it (Shard.Owner ""), rather than a lease no one can ever take.
// (DynamoDB keeps an empty string; a hand edit or another tool leaves one.)
const freeCondition = "attribute_not_exists(#o) OR #o = :none"

// Take makes me (the process of nonce) the owner of a shard's lease as
// scanned: free or held by s.Owner, at s.Counter. It returns the item as
// taken, or ErrLost when it changed since.
func (t *Table) Take(ctx context.Context, s Shard, me, nonce string) (Shard, error) {
	cond := "(" + freeCondition + ") AND #c = :c"
	values := map[string]types.AttributeValue{":me": str(me), ":c": num(s.Counter), ":next": num(s.Counter + 1)}
	if s.Owner != "" {
		cond = "#o = :from AND #c = :c"
		values[":from"] = str(s.Owner)
	} else {
		values[":none"] = str("")
	}
	update := "SET #o = :me, #c = :next, #t = :next REMOVE #h, #hn, #on, #w, #ho"
	if nonce != "" {
		update = "SET #o = :me, #on = :nonce, #c = :next, #t = :next REMOVE #h, #hn, #w, #ho"
		values[":nonce"] = str(nonce)
	}
	out, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:              aws.String(t.name),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		Key:                    map[string]types.AttributeValue{attrKey: str(s.Key())},
		UpdateExpression:       aws.String(update),
		ConditionExpression:    aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#on": attrOwnerNonce, "#c": attrCounter,
			"#h": attrHandoffTo, "#hn": attrHandoffNonce, "#w": attrWriteID, "#ho": attrHandedOver, "#t": attrTakenAt},
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if conditionFailed(err) {
		return Shard{}, ErrLost
	}
	if err != nil {
		return Shard{}, t.fail("taking the lease of shard "+s.ShardID, err)
	}
	t.announce(ctx, s.Stream, s.ShardID)
	return decodeShard(out.Attributes)
}

// Ask asks the owner of a shard's lease to hand it over to me once it has
// written its last checkpoint. It does not move the counter: the owner keeps
// the lease until it hands it over. ErrLost: the owner changed, or someone
// asked first. nonce is the asking process's (Worker.Nonce): the holder
// hands the lease over only while that process lives and asks.
func (t *Table) Ask(ctx context.Context, s Shard, me, nonce string) error {
	update := "SET #h = :me REMOVE #hn"
	values := map[string]types.AttributeValue{":me": str(me), ":owner": str(s.Owner)}
	if nonce != "" {
		update = "SET #h = :me, #hn = :nonce"
		values[":nonce"] = str(nonce)
	}
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(s.Key())},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#o = :owner AND attribute_not_exists(#h)"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#h": attrHandoffTo, "#hn": attrHandoffNonce},
		ExpressionAttributeValues: values,
	})
	if conditionFailed(err) {
		return ErrLost
	}
	if err != nil {
		return t.fail("asking for the lease of shard "+s.ShardID, err)
	}
	t.announce(ctx, s.Stream, s.ShardID)
	return nil
}

// Withdraw takes back my ask for a shard's lease, if it is still there: a
// stopping instance must not be handed leases.
func (t *Table) Withdraw(ctx context.Context, s Shard, me string) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(s.Key())},
		UpdateExpression:          aws.String("REMOVE #h, #hn"),
		ConditionExpression:       aws.String("#h = :me"),
		ExpressionAttributeNames:  map[string]string{"#h": attrHandoffTo, "#hn": attrHandoffNonce},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(me)},
	})
	if err != nil && !conditionFailed(err) {
		return t.fail("withdrawing the ask for the lease of shard "+s.ShardID, err)
	}
	if err == nil {
		t.announce(ctx, s.Stream, s.ShardID)
	}
	return nil
}

// Delete removes the item of a shard no longer in the stream (past the
// retention period), unless someone holds it.
func (t *Table) Delete(ctx context.Context, streamARN, shardID string) error {
	_, err := t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(ShardKey(streamARN, shardID))},
		ConditionExpression:       aws.String(freeCondition),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":none": str("")},
	})
	if err != nil && !conditionFailed(err) {
		return t.fail("deleting the item of shard "+shardID, err)
	}
	if err == nil {
		t.announce(ctx, streamARN, shardID)
	}
	return nil
}

// PutStream writes the item of a stream unless one exists, and returns the
// one in the table afterwards, and whether it is the one written.
func (t *Table) PutStream(ctx context.Context, s Stream) (Stream, bool, error) {
	existing, err := t.putNew(ctx, encodeStream(s), "writing the item of stream "+s.ARN)
	if err != nil || existing == nil {
		return s, err == nil, err
	}
	got, err := decodeStream(existing)
	return got, false, err
}

// ReplaceStream overwrites the item of a stream: it was created again, or
// its first shards are pinned. Its change counter moves (the instances
// scan the stream again), its change log goes, and its roster stays.
func (t *Table) ReplaceStream(ctx context.Context, s Stream) error {
	item := encodeStream(s)
	delete(item, attrKey)
	names := map[string]string{"#c": attrChanges}
	values := map[string]types.AttributeValue{":one": num(1)}
	var sets []string
	for i, k := range slices.Sorted(maps.Keys(item)) {
		n, v := fmt.Sprintf("#a%d", i), fmt.Sprintf(":a%d", i)
		names[n], values[v] = k, item[k]
		sets = append(sets, n+" = "+v)
	}
	expr := "SET " + strings.Join(sets, ", ")
	// The log goes: what it names is of the stream as it was (the move of
	// the counter, named nowhere, makes every instance scan).
	names["#l"] = attrLog
	removes := []string{"#l"}
	for i, k := range []string{attrCreated, attrStartTime} {
		if _, ok := item[k]; !ok {
			n := fmt.Sprintf("#r%d", i)
			names[n] = k
			removes = append(removes, n)
		}
	}
	if len(removes) > 0 {
		expr += " REMOVE " + strings.Join(removes, ", ")
	}
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(streamKey(s.ARN))},
		UpdateExpression:          aws.String(expr + " ADD #c :one"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return t.fail("writing the item of stream "+s.ARN, err)
	}
	return nil
}

// Heartbeat moves the counter of my worker item on a stream, creating it if
// needed, and writes what p holds: the nonce, the random id of this
// process, the loads and the config digest. Other instances count me among
// the live ones while the counter moves. Unless takeOver is set it is
// conditional on the item having no nonce or this one; another nonce means
// another process renews the same instance id, and Heartbeat returns
// ErrDuplicateInstance and changes nothing. takeOver writes the nonce
// whatever it was (the other process is known to be gone).
func (t *Table) Heartbeat(ctx context.Context, streamARN, me string, p Presence, takeOver bool) error {
	set := "SET #k2 = :kind, #s = :s, #o = :me, #c = if_not_exists(#c, :base) + :one, #n = :nonce, #l = :loads, #hl = :held"
	names := map[string]string{
		"#k2": attrKind, "#s": attrStream, "#o": attrOwner, "#c": attrCounter, "#n": attrNonce, "#l": attrLoads, "#hl": attrHeld,
	}
	if p.Born != "" {
		set += ", #b = if_not_exists(#b, :born)"
		names["#b"] = attrBorn
	}
	values := map[string]types.AttributeValue{
		":kind": str(kindWorker), ":s": str(streamARN), ":me": str(me), ":base": num(counterBase(p)), ":one": num(1), ":nonce": str(p.Nonce),
		":loads": encodeLoads(p.Loads), ":held": encodeHeld(p.Held),
	}
	if p.Born != "" {
		values[":born"] = str(p.Born)
	}
	if p.Roster {
		set += ", #rb = :true, #pf = :pf"
		names["#rb"], names["#pf"] = attrRosterBeats, attrProfile
		values[":true"], values[":pf"] = &types.AttributeValueMemberBOOL{Value: true}, num(p.Profile)
	}
	names["#cf"] = attrConfig
	if p.Config != nil {
		set += ", #cf = :config"
		values[":config"] = encodeConfig(p.Config)
	} else {
		set += " REMOVE #cf" // a digest of a config that no longer runs would mislead
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(workerKey(streamARN, me))},
		UpdateExpression:          aws.String(set),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
	if !takeOver {
		in.ConditionExpression = aws.String("attribute_not_exists(#n) OR #n = :nonce")
	}
	_, err := t.api.UpdateItem(ctx, in)
	if conditionFailed(err) {
		return ErrDuplicateInstance
	}
	if err != nil {
		return t.fail("renewing the presence of instance "+me, err)
	}
	return nil
}

// GetWorker reads the worker item of instance id on a stream, strongly
// consistent; ok is false when there is none.
func (t *Table) GetWorker(ctx context.Context, streamARN, id string) (w Worker, ok bool, err error) {
	item, err := t.getItem(ctx, workerKey(streamARN, id), "reading the presence of instance "+id)
	if err != nil || item == nil {
		return Worker{}, false, err
	}
	return decodeWorker(item), true, nil
}

// RemoveWorker deletes the worker item of an instance on a stream while it
// is still the item seen: at the counter seen, and born of the same
// heartbeat (Worker.Born). The presence of a dead instance, removed by
// anyone once it expired. An item that moved on (the instance lives), was
// written anew (it came back), or is gone already stays as it is, and that
// is no error: removed says whether it was deleted.
func (t *Table) RemoveWorker(ctx context.Context, streamARN string, seen Worker) (removed bool, err error) {
	cond := "#c = :c AND #b = :b"
	names := map[string]string{"#c": attrCounter, "#b": attrBorn}
	values := map[string]types.AttributeValue{":c": num(seen.Counter), ":b": str(seen.Born)}
	if seen.Born == "" {
		cond = "#c = :c AND attribute_not_exists(#b)"
		delete(values, ":b")
	}
	_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(workerKey(streamARN, seen.ID))},
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case conditionFailed(err):
		return false, nil
	case err != nil:
		return false, t.fail("removing the presence of expired instance "+seen.ID, err)
	}
	return true, nil
}

// Leave deletes my worker item on a stream, whatever it holds: the others
// stop counting me.
func (t *Table) Leave(ctx context.Context, streamARN, me string) error {
	_, err := t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:              aws.String(t.name),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		Key:                    map[string]types.AttributeValue{attrKey: str(workerKey(streamARN, me))},
	})
	if err != nil {
		return t.fail("removing the presence of instance "+me, err)
	}
	return nil
}

func conditionFailed(err error) bool {
	var failed *types.ConditionalCheckFailedException
	return errors.As(err, &failed)
}

// Replace overwrites the item of a shard whose starting sequence number is
// was (a shard of a stream deleted since, whose id the new stream reuses)
// with s, free. The new item continues the old one's counter (old + 1):
// lease counters only ever rise, so an instance still holding the old
// item's lease sees it taken (a higher counter, another owner) and its
// conditional writes fail with ErrLost instead of writing over s.
//
// The write is conditional on the start and the counter as read; a race
// lost to another write is read again and retried while the start is
// still was. An item that is gone, or has another start by then, was
// replaced by someone else: Replace returns nil and writes nothing. An
// item of a stream created after s.Created (both known) is never
// replaced: ErrLaterStream, for an instance whose listing is behind would
// otherwise put the old stream's shard back over the new one's.
func (t *Table) Replace(ctx context.Context, s Shard, was string) error {
	s.Owner, s.HandoffTo = "", ""
	what := "replacing the item of shard " + s.ShardID + " of an earlier stream"
	for {
		old, err := t.getItem(ctx, s.Key(), what)
		if err != nil {
			return err
		}
		next, cond, ok, err := replacing(old, was, s.Created)
		if err != nil {
			return fmt.Errorf("DynamoDB table %q: %s: %w", t.name, what, err)
		}
		if !ok {
			return nil
		}
		s.Counter = next
		in := &dynamodb.PutItemInput{
			TableName:                 aws.String(t.name),
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
			Item:                      encodeShard(s),
			ConditionExpression:       aws.String("#ss = :was AND " + cond),
			ExpressionAttributeNames:  map[string]string{"#ss": attrShardStart, "#c": attrCounter},
			ExpressionAttributeValues: map[string]types.AttributeValue{":was": str(was)},
		}
		if c, ok := old[attrCounter]; ok {
			in.ExpressionAttributeValues[":c"] = c
		}
		_, err = t.api.PutItem(ctx, in)
		if !conditionFailed(err) {
			if err != nil {
				return t.fail(what, err)
			}
			t.announce(ctx, s.Stream, s.ShardID)
			return nil
		}
	}
}

// replacing reads the item a Replace of was would overwrite: ok is false
// when there is none to replace (gone, or another start); next is the
// counter of the new item, and cond the condition on the old counter (#c,
// compared with :c, the old item's own value, when it has one): the write
// lands only on the item as read, so that what is checked here holds.
// ErrLaterStream: the old item is of a stream created after created.
func replacing(old map[string]types.AttributeValue, was string, created time.Time) (next int64, cond string, ok bool, err error) {
	if start, has := old[attrShardStart].(*types.AttributeValueMemberS); !has || start.Value != was {
		return 0, "", false, nil
	}
	if itemCreated, _ := getTime(old, attrCreated); itemCreated != nil && !created.IsZero() && itemCreated.After(created) {
		return 0, "", false, fmt.Errorf("item %s: created at %s, after %s: %w", getS(old, attrKey),
			itemCreated.UTC().Format(time.RFC3339Nano), created.UTC().Format(time.RFC3339Nano), ErrLaterStream)
	}
	if _, has := old[attrCounter]; !has {
		return 1, "attribute_not_exists(#c)", true, nil
	}
	n, err := getN(old, attrCounter)
	if err != nil {
		return 0, "", false, fmt.Errorf("item %s: %w", getS(old, attrKey), err)
	}
	return n + 1, "#c = :c", true, nil
}

// Overwrite writes the item of a shard as s, free: a position set or
// imported by an operator. It is conditional on the item being as prev was
// read (absent when prev is nil), and moves the counter past prev's, so an
// instance still holding the lease loses it at its next write instead of
// writing over the new position. ErrLost: the item changed since prev.
func (t *Table) Overwrite(ctx context.Context, s Shard, prev *Shard) error {
	s.Owner, s.HandoffTo, s.Counter = "", "", 0
	in := &dynamodb.PutItemInput{
		TableName:                aws.String(t.name),
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
		ConditionExpression:      aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": attrKey},
	}
	if prev != nil {
		s.Counter = prev.Counter + 1
		in.ConditionExpression = aws.String("#c = :c")
		in.ExpressionAttributeNames = map[string]string{"#c": attrCounter}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":c": num(prev.Counter)}
	}
	in.Item = encodeShard(s)
	_, err := t.api.PutItem(ctx, in)
	if conditionFailed(err) {
		return ErrLost
	}
	if err != nil {
		return t.fail("writing the item of shard "+s.ShardID, err)
	}
	t.announce(ctx, s.Stream, s.ShardID)
	return nil
}

// ReplaceMalformed replaces a malformed item, as read (was), by the item of
// s, free, at the same key; with s nil it deletes it (a second item of a
// shard). It is conditional on the item's counter attribute being as read,
// whatever its type: ErrLost when it changed since.
func (t *Table) ReplaceMalformed(ctx context.Context, was BrokenItem, s *Shard) error {
	cond, names, values := malformedCondition(was)
	var err error
	if s == nil {
		_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(t.name), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			Key:                 map[string]types.AttributeValue{attrKey: str(was.Key)},
			ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		})
	} else {
		c := *s
		c.Owner, c.HandoffTo, c.Counter = "", "", 1
		_, err = t.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(t.name), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			Item:                encodeShard(c),
			ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		})
	}
	if conditionFailed(err) {
		return ErrLost
	}
	if err != nil {
		return t.fail("replacing the malformed item "+was.Key, err)
	}
	t.announce(ctx, brokenStream(was, s), anyShard)
	return nil
}

// brokenStream is the stream of a malformed item that s replaces (nil:
// deletes).
func brokenStream(was BrokenItem, s *Shard) string {
	if s != nil {
		return s.Stream
	}
	return getS(was.Item, attrStream)
}

// ClaimRegistration claims the registration of a stream consumer for me: it
// reports whether me is the one to register it (no one else claimed it).
func (t *Table) ClaimRegistration(ctx context.Context, streamARN, consumer, me string) (bool, error) {
	_, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:              aws.String(t.name),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		Item: map[string]types.AttributeValue{
			attrKey: str(registrationKey(streamARN, consumer)), attrKind: str(kindRegistration),
			attrStream: str(streamARN), attrOwner: str(me),
		},
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR #o = :me"),
		ExpressionAttributeNames:  map[string]string{"#k": attrKey, "#o": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(me)},
	})
	if conditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, t.fail("claiming the registration of consumer "+consumer, err)
	}
	return true, nil
}

// DropRegistration removes the claim on a consumer's registration once it
// is registered.
func (t *Table) DropRegistration(ctx context.Context, streamARN, consumer string) error {
	_, err := t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:              aws.String(t.name),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		Key:                    map[string]types.AttributeValue{attrKey: str(registrationKey(streamARN, consumer))},
	})
	if err != nil {
		return t.fail("removing the claim on the registration of consumer "+consumer, err)
	}
	return nil
}
