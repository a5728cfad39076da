package ddbcost

import "testing"

// The worked examples of "DynamoDB read and write operations"
// (read-write-operations.html) and of the capacity pages it comes from.
func TestUnits(t *testing.T) {
	const kb = 1024
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		// "reading a 3,500-byte item consumes the same throughput as
		// reading a 4 KB item"
		{"GetItem of 3,500 bytes, strongly consistent", ReadUnits(3500, true), 1},
		{"GetItem of 3,500 bytes, eventually consistent", ReadUnits(3500, false), 0.5},
		// an 8 KB item: 2 units strongly consistent, 1 eventually
		{"GetItem of 8 KB, strongly consistent", ReadUnits(8*kb, true), 2},
		{"GetItem of 8 KB, eventually consistent", ReadUnits(8*kb, false), 1},
		// "If you read a 10 KB item, DynamoDB rounds the item size to 12 KB"
		{"GetItem of 10 KB", ReadUnits(10*kb, true), 3},
		// BatchGetItem of 1.5 KB and 6.5 KB is charged as 12 KB (4 + 8),
		// not 8 KB
		{"BatchGetItem of 1.5 KB and 6.5 KB", ReadUnits(1536, true) + ReadUnits(6656, true), 3},
		// a Query of 10 items of 40.8 KB together is rounded to 44 KB
		{"Query of 40.8 KB", ScanReadUnits(41779 /* 40.8 KB */, true), 11},
		{"Query of 40.8 KB, eventually consistent", ScanReadUnits(41779 /* 40.8 KB */, false), 5.5},
		// a Query of 1,500 items of 64 bytes is 96 KB
		{"Query of 1,500 items of 64 bytes", ScanReadUnits(1500*64, true), 24},
		{"Query of 1,500 items of 64 bytes one by one", 1500 * ReadUnits(64, true), 1500},
		// a read that finds nothing is still charged
		{"GetItem of a missing item", ReadUnits(0, false), 0.5},
		{"empty Scan", ScanReadUnits(0, false), 0.5},
		// a write unit writes up to 1 KB
		{"PutItem of 1 KB", WriteUnits(kb), 1},
		{"PutItem of 1 KB and a byte", WriteUnits(kb + 1), 2},
		{"PutItem of 2.5 KB", WriteUnits(2560), 3},
		// UpdateItem: the larger of the sizes before and after
		{"UpdateItem from 1.5 KB to 0.5 KB", WriteUnits(max(1536, 512)), 2},
		{"DeleteItem of a missing item", WriteUnits(0), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v units, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestIsWrite(t *testing.T) {
	for op, want := range map[string]bool{
		"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
		"GetItem": false, "BatchGetItem": false, "Scan": false, "Query": false, "DescribeTable": false,
	} {
		if got := IsWrite(op); got != want {
			t.Errorf("IsWrite(%s) = %v, want %v", op, got, want)
		}
	}
}
