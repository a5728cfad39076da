package lease

import (
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
)

// Usage is what the requests of one DynamoDB operation on one class of
// item consumed, as DynamoDB would bill them (internal/ddbcost): what a
// lease policy costs, measured on Memory in tests and simulations as the
// benchmarks measure it on DynamoDB.
type Usage struct {
	Calls      int64
	ReadUnits  float64
	WriteUnits float64
}

// Usage returns what Memory's calls consumed so far, by "Operation/class"
// ("UpdateItem/roster", "Scan/table"): each call counted as the requests
// *Table makes for it, each item as DynamoDB sizes it, a scan as reading
// every item of the table (a filter does not make it cheaper), a
// conditional write that failed by the size of the item it hit.
func (m *Memory) Usage() map[string]Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.usage)
}

// itemClass names the class of an item by its key: stream, shard, worker,
// roster or registration.
func itemClass(key string) string {
	switch {
	case strings.Contains(key, ":worker:"):
		return kindWorker
	case strings.Contains(key, ":roster:"):
		return kindRoster
	case strings.Contains(key, ":registration:"):
		return kindRegistration
	case strings.Contains(key[strings.LastIndexByte(key, '/')+1:], ":"):
		return kindShard
	}
	return kindStream
}

// charge counts a request. Must hold m.mu.
func (m *Memory) charge(op, class string, read, write float64) {
	if m.usage == nil {
		m.usage = map[string]Usage{}
	}
	u := m.usage[op+"/"+class]
	u.Calls++
	u.ReadUnits += read
	u.WriteUnits += write
	m.usage[op+"/"+class] = u
}

// chargeGet counts a GetItem of the item at key, as it is now. Must hold
// m.mu.
func (m *Memory) chargeGet(key string, consistent bool) {
	m.charge("GetItem", itemClass(key), ddbcost.ReadUnits(ddbcost.ItemSize(m.items[key]), consistent), 0)
}

// chargeWrite counts a write (PutItem, UpdateItem, DeleteItem) of the item
// at key that was before as before and is now as the write left it:
// charged by the larger of the two. Must hold m.mu.
func (m *Memory) chargeWrite(op, key string, before map[string]types.AttributeValue) {
	size := max(ddbcost.ItemSize(before), ddbcost.ItemSize(m.items[key]))
	m.charge(op, itemClass(key), 0, ddbcost.WriteUnits(size))
}

// chargeScan counts a Scan of the whole table, in pages of a megabyte.
// Must hold m.mu.
func (m *Memory) chargeScan(consistent bool) {
	const page = 1 << 20
	total, n := 0, 0
	for _, item := range m.items {
		size := ddbcost.ItemSize(item)
		if n+size > page {
			m.charge("Scan", "table", ddbcost.ScanReadUnits(n, consistent), 0)
			n = 0
		}
		n += size
		total += size
	}
	m.charge("Scan", "table", ddbcost.ScanReadUnits(n, consistent), 0)
}
