package ddbcost

// The sizes units are counted in: a read unit reads up to 4 KB, a write
// unit writes up to 1 KB.
const (
	readUnitBytes  = 4 * 1024
	writeUnitBytes = 1024
)

// The rules of "DynamoDB read and write operations"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html),
// for requests that are not transactions. A request that finds nothing is
// charged as one of a small item: a read of a missing item, a delete of a
// missing item, an empty scan each consume the least a request can.

// ReadUnits is what one item of sizeBytes read by GetItem, or one item of a
// BatchGetItem (which is charged as a GetItem per item), consumes: its size
// rounded up to 4 KB, one unit per 4 KB strongly consistent (consistent),
// half that eventually consistent.
func ReadUnits(sizeBytes int, consistent bool) float64 {
	return readUnits(chunks(sizeBytes, readUnitBytes), consistent)
}

// ScanReadUnits is what a Scan or Query page that read items of totalBytes
// together consumes: the total, not each item, rounded up to 4 KB. Items a
// filter then drops count as read.
func ScanReadUnits(totalBytes int, consistent bool) float64 {
	return readUnits(chunks(totalBytes, readUnitBytes), consistent)
}

func readUnits(n int, consistent bool) float64 {
	if consistent {
		return float64(n)
	}
	return float64(n) / 2
}

// WriteUnits is what a PutItem, UpdateItem or DeleteItem of an item of
// sizeBytes consumes: one unit per 1 KB, rounded up. The size is the
// item's as the write leaves it (PutItem), the larger of its sizes before
// and after (UpdateItem: the whole item, however few attributes change),
// or the deleted item's (DeleteItem). A conditional write whose condition
// fails consumes units too, by the item's size.
func WriteUnits(sizeBytes int) float64 {
	return float64(chunks(sizeBytes, writeUnitBytes))
}

// chunks is size in whole units of unit bytes, at least one.
func chunks(size, unit int) int {
	return max(1, (size+unit-1)/unit)
}

// IsWrite tells the operations whose capacity is counted in write units
// (PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems)
// from those counted in read units: what a tally of units by operation
// needs to price them.
func IsWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}
