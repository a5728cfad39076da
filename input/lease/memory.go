package lease

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Memory is a lease table in memory: a Store with the semantics of *Table
// (its conditions, counters and errors), for unit tests of the input's lease
// policy that run without an emulator. It keeps the items as *Table writes
// them to DynamoDB, attribute by attribute, and reads them with the same
// decoding, so what one returns the other returns. Each call is atomic
// (one mutex), as a single DynamoDB request is; there are no lost answers
// and no retries, so the write id of Hold is not kept.
//
// Fail and FailAll make calls fail on demand; Items, Workers and SetShard
// look at and plant items for assertions. Memory is safe for concurrent use.
type Memory struct {
	mu sync.Mutex
	// items by leaseKey. An item's map is replaced, never changed in
	// place, and its values are never changed: reads may keep them.
	items   map[string]map[string]types.AttributeValue
	fails   map[string]error
	failAll error
	// usage is what the calls consumed, by operation and class of item
	// (see Usage).
	usage map[string]Usage
}

// NewMemory returns an empty in-memory lease table.
func NewMemory() *Memory {
	return &Memory{items: map[string]map[string]types.AttributeValue{}, fails: map[string]error{}}
}

const memoryName = "memory"

// Name is "memory".
func (m *Memory) Name() string { return memoryName }

// Fail makes every later call of the Store method named op (e.g. "Hold",
// "Scan", "Heartbeat") return err, changing nothing, until Fail(op, nil).
// A failure set for op wins over one set by FailAll. It panics when op is
// not a Store method that returns an error: a misspelt op would otherwise
// never fail.
func (m *Memory) Fail(op string, err error) {
	method, ok := reflect.TypeFor[Store]().MethodByName(op)
	if !ok || method.Type.NumOut() == 0 || method.Type.Out(method.Type.NumOut()-1) != reflect.TypeFor[error]() {
		panic(fmt.Sprintf("lease.Memory.Fail: %q is not a Store method that returns an error; name one such as \"Hold\", \"Scan\" or \"Heartbeat\"", op))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.fails, op)
	} else {
		m.fails[op] = err
	}
}

// FailAll makes every later call of every method (Name aside) return err,
// changing nothing: an unreachable table. FailAll(nil) ends that; failures
// set by Fail for single methods stay.
func (m *Memory) FailAll(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAll = err
}

// enter locks m for one call of op. It returns, with m unlocked, the
// context's error once it is done (as the SDK does) or the failure set for
// op.
func (m *Memory) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease table %q: %s: %w", memoryName, op, err)
	}
	m.mu.Lock()
	err := m.fails[op]
	if err == nil {
		err = m.failAll
	}
	if err != nil {
		m.mu.Unlock()
	}
	return err
}

// wrap names the table in an error of an item, as *Table does.
func (m *Memory) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lease table %q: %w", memoryName, err)
}

// Items returns the shard items of every stream, ordered by stream and
// shard id, as stored: without the checks of a read, so that an item
// planted by SetShard that Get refuses is listed too.
func (m *Memory) Items() []Shard {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Shard
	for _, key := range slices.Sorted(maps.Keys(m.items)) {
		if item := m.items[key]; getS(item, attrKind) == kindShard {
			s, _ := parseShard(item)
			out = append(out, s)
		}
	}
	return out
}

// Peek returns a shard's item as stored, as Items does: unbilled, with no
// fault, for what watches the table (a simulation's bookkeeping) rather
// than uses it.
func (m *Memory) Peek(streamARN, shardID string) (Shard, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	item := m.items[ShardKey(streamARN, shardID)]
	if item == nil {
		return Shard{}, false
	}
	s, err := parseShard(item)
	return s, err == nil
}

// Workers returns the worker items of every stream, ordered by stream and
// instance id.
func (m *Memory) Workers() []Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Worker
	for _, key := range slices.Sorted(maps.Keys(m.items)) {
		if item := m.items[key]; getS(item, attrKind) == kindWorker {
			out = append(out, decodeWorker(item))
		}
	}
	return out
}

// SetShard plants the item of s as it is (owner, counter and handoff
// included), over any item of its key, and is never made to fail. It
// announces the change, as the checkpoint command's writes do.
func (m *Memory) SetShard(s Shard) {
	item := encodeShard(s)
	if s.HandoffTo != "" {
		item[attrHandoffTo] = str(s.HandoffTo)
	}
	if s.HandoffNonce != "" {
		item[attrHandoffNonce] = str(s.HandoffNonce)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[s.Key()] = item
	m.announce(s.Stream, s.ShardID)
}

// SetItem plants an item as it is, attribute by attribute, over any item of
// its leaseKey: one no instance writes (another type, another schema), to
// see how it is read. It is never made to fail. It announces a change of
// the stream the item names (streamArn), as if made with the checkpoint
// command: an edit by hand is seen at the next safety scan.
func (m *Memory) SetItem(item map[string]types.AttributeValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[getS(item, attrKey)] = maps.Clone(item)
	m.announce(getS(item, attrStream), anyShard)
}

// free reports whether an item's lease is free: no leaseOwner, or an empty
// one (see freeCondition).
func free(item map[string]types.AttributeValue) bool {
	return !has(item, attrOwner) || eqS(item, attrOwner, "")
}

// update returns a copy of item (a new item when nil) with sets set and
// removes removed.
func update(item, sets map[string]types.AttributeValue, removes ...string) map[string]types.AttributeValue {
	out := maps.Clone(item)
	if out == nil {
		out = map[string]types.AttributeValue{}
	}
	for _, k := range removes {
		delete(out, k)
	}
	maps.Copy(out, sets)
	return out
}

// has is the condition attribute_exists(name).
func has(item map[string]types.AttributeValue, name string) bool {
	_, ok := item[name]
	return ok
}

// eqS is the condition name = v for a string v: false when name is absent.
func eqS(item map[string]types.AttributeValue, name, v string) bool {
	a, ok := item[name].(*types.AttributeValueMemberS)
	return ok && a.Value == v
}

// eqN is the condition name = v for a number v: false when name is absent.
func eqN(item map[string]types.AttributeValue, name string, v int64) bool {
	n, err := getN(item, name)
	return has(item, name) && err == nil && n == v
}
