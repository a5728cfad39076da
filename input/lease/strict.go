package lease

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// shardAttrTypes are the DynamoDB types of a shard item's attributes.
// Attributes not listed (another program's) are left alone.
var shardAttrTypes = map[string]string{
	attrKey: "S", attrKind: "S", attrStream: "S", attrShard: "S", attrOwner: "S",
	attrCounter: "N", attrCheckpoint: "S", attrSubSequence: "N", attrPartial: "BOOL",
	attrParents: "SS", attrStartKind: "S", attrStartTime: "S", attrShardStart: "S",
	attrHandoffTo: "S", attrWriteID: "S", attrOwnerNonce: "S", attrHandoffNonce: "S",
	attrCreated: "S", attrHandedOver: "BOOL", attrTakenAt: "N",
}

// AttrType names the DynamoDB type of an attribute value (S, N, BOOL, ...).
func AttrType(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberM:
		return "M"
	case *types.AttributeValueMemberL:
		return "L"
	}
	return fmt.Sprintf("%T", v)
}

// AttrValue renders an attribute value for a message: its type and, for a
// scalar, its value.
func AttrValue(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		s := v.Value
		if len(s) > 60 {
			return fmt.Sprintf("S %q... (%d characters)", s[:60], len(s))
		}
		return fmt.Sprintf("S %q", s)
	case *types.AttributeValueMemberN:
		return "N " + v.Value
	case *types.AttributeValueMemberBOOL:
		return "BOOL " + strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberSS:
		return fmt.Sprintf("SS %q", v.Value)
	}
	return AttrType(v)
}

// MalformedItemError is an item at a shard's key that is not a well-formed
// shard item: no instance may take or read the shard until it is set again
// (`checkpoint set --force`).
type MalformedItemError struct {
	Key  string                          // the item's leaseKey
	Item map[string]types.AttributeValue // as read
	Err  error                           // names the item, the attribute, its value and the expected type
}

// Broken returns the item as a BrokenItem of shard id.
func (e *MalformedItemError) Broken(id string) BrokenItem {
	return BrokenItem{Key: e.Key, ShardID: id, Item: e.Item, Err: e}
}

func (e *MalformedItemError) Error() string { return e.Err.Error() }
func (e *MalformedItemError) Unwrap() error { return e.Err }

// attrError is an attribute of an item that is not what it must be.
func attrError(key, name string, v types.AttributeValue, expected string) error {
	got := "missing"
	if v != nil {
		got = AttrValue(v)
	}
	return fmt.Errorf("item %s: attribute %s is %s, expected %s", key, name, got, expected)
}

// checkShardItem reports the first attribute of a shard item that is not
// what this input writes: of another type, a sequence number that is not
// one, a start that cannot be read from. What passes decodes to a
// checkpoint that can be resumed from, with nothing read as a default.
func checkShardItem(item map[string]types.AttributeValue) error {
	key := getS(item, attrKey)
	for name, want := range shardAttrTypes {
		if v, ok := item[name]; ok && AttrType(v) != want {
			return attrError(key, name, v, want+" ("+typeMeaning(name)+")")
		}
	}
	if v, ok := item[attrKind]; !ok || getS(item, attrKind) != kindShard {
		return attrError(key, attrKind, v, `S "shard"`)
	}
	for _, name := range []string{attrStream, attrShard} {
		if getS(item, name) == "" {
			return attrError(key, name, item[name], "S (not empty)")
		}
	}
	if want := ShardKey(getS(item, attrStream), getS(item, attrShard)); key != want {
		return fmt.Errorf("item %s: it is a second item of shard %s of stream %s, whose item is %s: one shard has one item", key, getS(item, attrShard), getS(item, attrStream), want)
	}
	if _, err := getN(item, attrCounter); err != nil || !has(item, attrCounter) {
		return attrError(key, attrCounter, item[attrCounter], "N (an integer)")
	}
	if v, ok := item[attrShardStart]; ok {
		if err := checkpoint.CheckSequence(attrShardStart, getS(item, attrShardStart)); err != nil {
			return attrError(key, attrShardStart, v, "a sequence number (1 to 129 decimal digits)")
		}
	}
	seq, hasCheckpoint := item[attrCheckpoint]
	switch s := getS(item, attrCheckpoint); {
	case !hasCheckpoint, s == shardEnd:
	default:
		if err := checkpoint.CheckSequence(attrCheckpoint, s); err != nil {
			return attrError(key, attrCheckpoint, seq, "a sequence number (1 to 129 decimal digits) or "+shardEnd)
		}
		if v, ok := item[attrSubSequence]; ok {
			if n, err := getN(item, attrSubSequence); err != nil || n < 0 {
				return attrError(key, attrSubSequence, v, "N (an integer of 0 or more)")
			}
		}
	}
	if v, ok := item[attrStartTime]; ok {
		t, err := time.Parse(timestampEncoder, getS(item, attrStartTime))
		if err != nil || checkpoint.CheckStoredStartTime(attrStartTime, t) != nil {
			return attrError(key, attrStartTime, v, "S (an RFC 3339 time after 2013 and less than a day from now)")
		}
	}
	if v, ok := item[attrCreated]; ok {
		if _, err := time.Parse(timestampEncoder, getS(item, attrCreated)); err != nil {
			return attrError(key, attrCreated, v, "S (an RFC 3339 time: the creation time of the stream)")
		}
	}
	if !hasCheckpoint {
		kinds := []string{"TRIM_HORIZON", "AT_TIMESTAMP", "LATEST"} // shard.StartKind names
		kind := getS(item, attrStartKind)
		switch {
		case !slices.Contains(kinds, kind):
			return attrError(key, attrStartKind, item[attrStartKind], "S (one of "+strings.Join(kinds, ", ")+")")
		case kind == "AT_TIMESTAMP" && !has(item, attrStartTime):
			return attrError(key, attrStartTime, nil, "S (the RFC 3339 time AT_TIMESTAMP starts at)")
		}
	}
	return nil
}

func typeMeaning(name string) string {
	switch name {
	case attrCounter:
		return "an integer"
	case attrSubSequence:
		return "an integer of 0 or more"
	case attrCheckpoint:
		return "a sequence number or " + shardEnd
	case attrPartial:
		return "true or false"
	case attrParents:
		return "a set of shard ids"
	case attrStartTime, attrCreated:
		return "an RFC 3339 time"
	case attrShardStart:
		return "a sequence number"
	}
	return "a string"
}

// shardOfItem returns the shard an item names: its shardId when that is a
// string, else the shard id at the end of its leaseKey (stream ARN, ':',
// shard id), else "".
func shardOfItem(item map[string]types.AttributeValue) string {
	if id := getS(item, attrShard); id != "" {
		return id
	}
	key := getS(item, attrKey)
	if i := strings.LastIndex(key, ":"); i >= 0 && strings.HasPrefix(key[i+1:], "shardId-") {
		return key[i+1:]
	}
	return ""
}

// malformedCondition is the condition that the item at was.Key is as read:
// it exists, and its counter is the value read, whatever its type, or
// absent as read.
func malformedCondition(was BrokenItem) (cond string, names map[string]string, values map[string]types.AttributeValue) {
	names = map[string]string{"#k": attrKey, "#c": attrCounter}
	if v, ok := was.Item[attrCounter]; ok {
		return "attribute_exists(#k) AND #c = :c", names, map[string]types.AttributeValue{":c": v}
	}
	return "attribute_exists(#k) AND attribute_not_exists(#c)", names, nil
}

// stillAsRead is malformedCondition for Memory.
func stillAsRead(item map[string]types.AttributeValue, was BrokenItem) bool {
	if item == nil {
		return false
	}
	v, ok := item[attrCounter]
	w, wok := was.Item[attrCounter]
	return ok == wok && (!ok || reflect.DeepEqual(v, w))
}
