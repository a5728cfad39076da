package lease

// The change log: how an instance learns, from its poll of the stream's
// item, which leases changed owner since its last poll, and reads only
// those items rather than the whole stream. Every change of a lease's owner
// (a take, an ask, a withdrawal, a handover, a release, an item created,
// deleted or set) moves the stream's change counter (leaseChanges), and
// then names its shard in the stream's leaseLog map under the counter's new
// value; the map keeps the last logKeep entries. An instance that polled
// counter n before and sees m now reads the items the entries n+1..m name;
// an entry missing (its writing failed, or is still on its way, or was
// dropped for a newer one) or one naming no shard (a stream-wide change)
// makes it scan the stream instead. So a change is never missed: at worst
// it costs a scan, as every change did before the log.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// logKeep is how many changes the stream's item names: two kilobytes or
// so of entries, so that writing one costs three write units, and reading
// the stream's item half a read unit still. A reader more changes behind
// than that scans. (32 left a process joining 100 on 10,000 shards
// scanning in most cycles of its first minute: 1,540 scans, 195,000 read
// units; 64: 516 scans, 98,000.)
const logKeep = 64

// logSweep is how many entries each change drops: the one logKeep before
// it, and those before that one, left by changes whose entry was never
// written.
const logSweep = 4

// anyShard is the log entry of a change that names no one shard (the
// stream's item written again, a malformed item replaced, an announcement
// sent late): its readers scan the stream.
const anyShard = "*"

// ChangedSince returns the shards whose lease changed owner after the
// change counter read from (Stream.Changes), as the stream's item names
// them, each once; ok is false when the item does not name them all (the
// reader then scans the stream's items).
func (s Stream) ChangedSince(from int64) (shards []string, ok bool) {
	if s.Changes < from || s.Changes-from > logKeep {
		return nil, false
	}
	for n := from + 1; n <= s.Changes; n++ {
		id, named := s.Log[n]
		if !named || id == anyShard {
			return nil, false
		}
		if !slices.Contains(shards, id) {
			shards = append(shards, id)
		}
	}
	return shards, true
}

// oneAttempt makes an announcement's writes once, unretried: every change
// of owner writes the one stream item, and a fleet starting on many shards
// changes thousands at once, far past the thousand write units a second
// DynamoDB serves an item. Throttled, a write is not worth the SDK's
// retries: they would hold up the take that made the change and spend the
// client's retry quota, which the heartbeats and commits need. A failed
// move of the counter is owed (one announcement of the stream as a whole,
// before the next poll), a failed entry lets its readers scan.
func oneAttempt(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

// announceEach is how many created items Announce names one by one: more
// are announced as a change of the stream (the instances scan), in two
// writes of the stream's item however many (1,024 items created by 16
// instances at their start, each named, queued 2,048 writes of that one
// item: DynamoDB serves an item about 1,000 writes a second, and dynalite
// fell so far behind that the instances' beats lapsed).
const announceEach = 4

// Announce tells the stream's instances that the items of shardIDs were
// created (see Create): each by name, or, when they are more than
// announceEach (or none are named), the stream as a whole.
func (t *Table) Announce(ctx context.Context, streamARN string, shardIDs []string) {
	for _, id := range announced(shardIDs) {
		t.announce(ctx, streamARN, id)
	}
}

// announced is what an announcement of shardIDs names.
func announced(shardIDs []string) []string {
	if len(shardIDs) == 0 || len(shardIDs) > announceEach {
		return []string{anyShard}
	}
	return shardIDs
}

// announce tells the stream's instances that the lease of shardID changed
// owner (anyShard: something of the stream changed): it moves the change
// counter, and names the shard in the log under the counter's new value,
// dropping the entry logKeep before. Every instance polls the counter each
// cycle (see Stream.ChangedSince). An announcement whose move fails is
// owed, and sent before the next poll of this table (naming no shard): the
// change it tells of was made, and the others would see it only at their
// next scan otherwise. One whose entry fails is not: its readers scan. A
// stream with no item yet (nothing reads it) is not announced to. Neither
// write is retried (oneAttempt).
func (t *Table) announce(ctx context.Context, streamID, shardID string) {
	out, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(streamKey(streamID))},
		UpdateExpression:          aws.String("ADD #c :one"),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  map[string]string{"#c": attrChanges, "#k": attrKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	}, oneAttempt)
	t.mu.Lock()
	if err != nil && !conditionFailed(err) {
		t.owed[streamID] = true
	} else {
		delete(t.owed, streamID)
	}
	t.mu.Unlock()
	if err != nil {
		return
	}
	if n, nerr := getN(out.Attributes, attrChanges); nerr == nil {
		t.logChange(ctx, streamID, n, shardID)
	}
}

// logChange names shardID in the stream's log under counter n. A log not
// there yet (a stream's item of a version before the log) is written
// whole.
func (t *Table) logChange(ctx context.Context, streamID string, n int64, shardID string) {
	key := strconv.FormatInt(n, 10)
	// The entries logKeep and a few more before: one left by an entry
	// that was never written (its writing failed, or the stream's item was
	// written again) goes too.
	names := map[string]string{"#l": attrLog, "#n": key}
	var removes []string
	for i := range int64(logSweep) {
		o := fmt.Sprintf("#o%d", i)
		names[o] = strconv.FormatInt(n-logKeep-i, 10)
		removes = append(removes, "#l."+o)
	}
	for range 2 {
		err := t.updateStream(ctx, streamID, "SET #l.#n = :s REMOVE "+strings.Join(removes, ", "), "attribute_exists(#l)",
			names, map[string]types.AttributeValue{":s": str(shardID)}, oneAttempt)
		if !conditionFailed(err) {
			return
		}
		err = t.updateStream(ctx, streamID, "SET #l = :m", "attribute_exists(#k) AND attribute_not_exists(#l)",
			map[string]string{"#l": attrLog, "#k": attrKey},
			map[string]types.AttributeValue{":m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{key: str(shardID)}}}, oneAttempt)
		if !conditionFailed(err) {
			return
		}
	}
}

// announceOwed sends the announcement owed for a stream, if one is.
func (t *Table) announceOwed(ctx context.Context, streamID string) {
	t.mu.Lock()
	owed := t.owed[streamID]
	t.mu.Unlock()
	if owed {
		t.announce(ctx, streamID, anyShard)
	}
}

// decodeLog reads a stream item's log (entries that are not a counter
// and a shard are left out: they name nothing, and their counters read as
// missing).
func decodeLog(item map[string]types.AttributeValue) map[int64]string {
	m, _ := item[attrLog].(*types.AttributeValueMemberM)
	if m == nil {
		return nil
	}
	out := make(map[int64]string, len(m.Value))
	for k, v := range m.Value {
		n, err := strconv.ParseInt(k, 10, 64)
		s, isS := v.(*types.AttributeValueMemberS)
		if err == nil && isS {
			out[n] = s.Value
		}
	}
	return out
}

// Announce is Table.Announce.
func (m *Memory) Announce(ctx context.Context, streamARN string, shardIDs []string) {
	if m.enter(ctx, "Announce") != nil {
		return
	}
	defer m.mu.Unlock()
	for _, id := range announced(shardIDs) {
		m.announce(streamARN, id)
	}
}

// announce is Table.announce for the memory store, in one step (its
// billing counts the two writes). Must hold m.mu.
func (m *Memory) announce(streamID, shardID string) {
	key := streamKey(streamID)
	st := m.items[key]
	m.chargeWrite("UpdateItem", key, st)
	if st == nil {
		return
	}
	n, _ := getN(st, attrChanges)
	n++
	log := map[string]types.AttributeValue{}
	if l, ok := st[attrLog].(*types.AttributeValueMemberM); ok {
		for k, v := range l.Value {
			if c, err := strconv.ParseInt(k, 10, 64); err != nil || c > n-logKeep {
				log[k] = v
			}
		}
	}
	log[strconv.FormatInt(n, 10)] = str(shardID)
	m.items[key] = update(st, map[string]types.AttributeValue{attrChanges: num(n), attrLog: &types.AttributeValueMemberM{Value: log}})
	m.chargeWrite("UpdateItem", key, st)
}
