package ddbcost

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type (
	s    = types.AttributeValueMemberS
	n    = types.AttributeValueMemberN
	b    = types.AttributeValueMemberB
	l    = types.AttributeValueMemberL
	m    = types.AttributeValueMemberM
	item = map[string]types.AttributeValue
)

// Each case follows one rule of "DynamoDB item sizes and formats"
// (CapacityUnitCalculations.html): name bytes plus value bytes.
func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		item item
		want int
	}{
		{"empty item", item{}, 0},
		{"string: name and value in UTF-8", item{"name": &s{Value: "abc"}}, 4 + 3},
		{"string: multi-byte UTF-8", item{"né": &s{Value: "日本"}}, 3 + 6},
		{"empty string", item{"a": &s{Value: ""}}, 1},
		{"binary: raw bytes, not base64", item{"b": &b{Value: make([]byte, 10)}}, 1 + 10},
		{"Boolean: 1 byte", item{"ok": &types.AttributeValueMemberBOOL{Value: true}}, 2 + 1},
		{"null: 1 byte", item{"x": &types.AttributeValueMemberNULL{Value: true}}, 1 + 1},
		{"number: 1 byte and a pair of digits", item{"n": &n{Value: "12"}}, 1 + 2},
		{"list: 3 bytes and 1 per element", item{"l": &l{Value: []types.AttributeValue{&s{Value: "a"}, &s{Value: "bc"}}}}, 1 + 3 + (1 + 1) + (1 + 2)},
		{"empty list: 3 bytes", item{"l": &l{}}, 1 + 3},
		{"empty map: 3 bytes", item{"m": &m{Value: item{}}}, 1 + 3},
		{"map: keys count as names", item{"m": &m{Value: item{"k": &s{Value: "v"}, "kk": &n{Value: "7"}}}}, 1 + 3 + (1 + 1 + 1) + (1 + 2 + 2)},
		{"nested: a map in a list", item{"l": &l{Value: []types.AttributeValue{&m{Value: item{"k": &s{Value: "v"}}}}}}, 1 + 3 + 1 + (3 + 1 + 1 + 1)},
		{"string set: its strings", item{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bb"}}}, 2 + 3},
		{"number set: its numbers", item{"ns": &types.AttributeValueMemberNS{Value: []string{"1", "123"}}}, 2 + 2 + 3},
		{"binary set: its bytes", item{"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1, 2}, {3}}}}, 2 + 3},
		{"a shard's lease", item{
			"leaseKey":     &s{Value: "arn:aws:kinesis:us-east-1:123456789012:stream/orders:shardId-000000000000"},
			"leaseOwner":   &s{Value: "i00"},
			"leaseCounter": &n{Value: "1234"},
			"checkpoint":   &s{Value: "49590338271490256608559692538361571095921575989136588898"},
		}, 8 + 73 + 10 + 3 + 12 + 3 + 10 + 56},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ItemSize(tc.item); got != tc.want {
				t.Errorf("ItemSize = %d, want %d", got, tc.want)
			}
		})
	}
}

// Digits are paired from the decimal point (base 100), leading and
// trailing zeros do not count, a negative number takes a byte more.
func TestNumberSize(t *testing.T) {
	for _, tc := range []struct {
		n    string
		want int
	}{
		{"0", 1},
		{"-0.00", 1},
		{"1", 2},
		{"12", 2},
		{"123", 3},
		{"100", 2},
		{"1000", 2},
		{"1E+3", 2},
		{"1.2", 3},  // 01.20: two pairs
		{"12.5", 3}, // 12.50
		{"12.50", 3},
		{"0.001", 2},
		{"1.001", 4},
		{"10.01", 3},
		{"007", 2},
		{"-1", 3},
		{"-123.456e5", 5}, // -12345600: 12 34 56 (00 trimmed), and the sign
		{"+5", 2},
		{strings.Repeat("9", 38), 20},
		{"1.5e-130", 3},
		{"not a number", 12},
	} {
		if got := numberSize(tc.n); got != tc.want {
			t.Errorf("numberSize(%q) = %d, want %d", tc.n, got, tc.want)
		}
	}
}
