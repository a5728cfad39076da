package ddbcost

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is the size of item in bytes as DynamoDB counts it for capacity
// units and for its 400 KB limit, by the rules of "DynamoDB item sizes and
// formats"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
//
//   - every attribute counts the UTF-8 bytes of its name, plus its value;
//   - a string, its UTF-8 bytes; a binary, its raw bytes (not the base64
//     sent on the wire);
//   - a number, 1 byte plus 1 per two significant digits (see numberSize);
//   - a Boolean or a null, 1 byte;
//   - a list or a map, 3 bytes whatever it holds, plus 1 byte per element,
//     plus the elements' sizes (a map's keys count as attribute names);
//   - a set, the sum of its elements' sizes.
//
// It is the size a write is charged by and a read is rounded from: storage
// adds 100 bytes of indexing per item that no request is charged for.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one value, without the name it is stored under.
// A value of a type this package does not know (a newer SDK's) counts 0.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + ItemSize(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize is the size of a number written in decimal as DynamoDB takes
// it ("-12.50", "1E+3"). AWS documents it as about 1 byte per two
// significant digits plus 1, leading and trailing zeros trimmed. The pairs
// are counted from the decimal point, as DynamoDB stores a number in base
// 100: 12 is one pair and 1.2 two (01.20); a negative number takes 1 byte
// more, and zero 1 byte. That is what dynalite, whose sizes were checked
// against DynamoDB's, computes, and what this package's emulator test
// compares with. A string that is no number counts its length.
func numberSize(s string) int {
	mant, exp, neg, ok := splitNumber(s)
	if !ok {
		return len(s)
	}
	first := strings.IndexFunc(mant, func(r rune) bool { return r != '0' })
	if first < 0 {
		return 1 // zero
	}
	last := strings.LastIndexFunc(mant, func(r rune) bool { return r != '0' })
	// The powers of ten of the first and last significant digits: the
	// mantissa's digits stand for d × 10^(exp+len-1-i).
	hi := exp + len(mant) - 1 - first
	lo := exp + len(mant) - 1 - last
	n := 1 + floorHalf(hi) - floorHalf(lo) + 1
	if neg {
		n++
	}
	return n
}

// splitNumber splits a decimal number into its digits without the point,
// the power of ten of the last of them, and its sign.
func splitNumber(s string) (mant string, exp int, neg, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", 0, false, false
	}
	switch s[0] {
	case '-':
		neg, s = true, s[1:]
	case '+':
		s = s[1:]
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, ok := parseInt(s[i+1:])
		if !ok {
			return "", 0, false, false
		}
		exp, s = e, s[:i]
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		exp -= len(s) - i - 1
		s = s[:i] + s[i+1:]
	}
	if s == "" {
		return "", 0, false, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return "", 0, false, false
		}
	}
	return s, exp, neg, true
}

// parseInt reads an exponent: an optional sign and digits.
func parseInt(s string) (int, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	if s == "" || len(s) > 6 {
		return 0, false // DynamoDB's exponents are within ±130
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		n = n*10 + int(r-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// floorHalf is ⌊p/2⌋, also for negative p: the base-100 digit that holds
// the decimal digit of power p.
func floorHalf(p int) int {
	if p < 0 {
		return -((-p + 1) / 2)
	}
	return p / 2
}
