package shard

import "strings"

// MaxSequenceDigits is the most digits of a Kinesis sequence number (the
// API's pattern is 0|([1-9]\d{0,128})).
const MaxSequenceDigits = 129

// ValidSequence reports whether s is a Kinesis sequence number as the API
// takes one: 0, or up to MaxSequenceDigits decimal digits without a leading
// zero.
func ValidSequence(s string) bool {
	if s == "" || len(s) > MaxSequenceDigits || (s[0] == '0' && s != "0") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CompareSequence orders two Kinesis sequence numbers numerically: it returns
// -1, 0 or +1. Sequence numbers are decimal strings of up to 128 digits and are
// not all of one length, so they must not be compared as plain strings. Both
// arguments must satisfy ValidSequence.
func CompareSequence(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}
