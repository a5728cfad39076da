package kpl

// This file holds the small subset of the protocol buffer wire format that the
// three KPL messages need: varints, length-delimited fields, and skipping of
// fixed-width fields that a newer producer might add.

// Wire types of the protocol buffer encoding.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// Reasons shared by every decoding step. They are constants so that the
// decoder allocates nothing until it has to report an error.
const (
	reasonTruncated = "truncated protobuf"
	reasonOverlong  = "overlong varint"
)

// maxFieldNumber is the largest field number the encoding allows (2^29-1).
const maxFieldNumber = 1<<29 - 1

// field is one decoded protocol buffer field. For wireVarint, val holds the
// value; for wireBytes, body holds the payload, capped so that appending to it
// can never overwrite the bytes that follow it.
type field struct {
	num  uint64
	typ  uint8
	val  uint64
	body []byte
}

// consumeVarint decodes the varint at the start of b. It returns the value and
// the number of bytes read, or n == 0 with a reason when b ends inside the
// varint or the varint does not fit in 64 bits. Redundant continuation bytes
// (e.g. 0x80 0x00 for zero) are accepted, as protocol buffer decoders do.
func consumeVarint(b []byte) (v uint64, n int, reason string) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1, ""
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == 9 {
			// The tenth byte holds bit 63 only.
			if c > 1 {
				return 0, 0, reasonOverlong
			}
			return v | uint64(c)<<63, 10, ""
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1, ""
		}
	}
	return 0, 0, reasonTruncated
}

// nextField decodes the field at the start of b and returns it with the rest
// of b. A non-empty reason reports malformed input; field and rest are then
// meaningless. Groups (wire types 3 and 4, deprecated and never written by the
// KPL) and the undefined wire types 6 and 7 are malformed here.
func nextField(b []byte) (f field, rest []byte, reason string) {
	tag, n, reason := consumeVarint(b)
	if reason != "" {
		return f, nil, reason
	}
	b = b[n:]
	f.num, f.typ = tag>>3, uint8(tag&7)
	if f.num == 0 || f.num > maxFieldNumber {
		return f, nil, "invalid field number"
	}
	switch f.typ {
	case wireVarint:
		f.val, n, reason = consumeVarint(b)
		if reason != "" {
			return f, nil, reason
		}
		return f, b[n:], ""
	case wireBytes:
		size, n, reason := consumeVarint(b)
		if reason != "" {
			return f, nil, reason
		}
		b = b[n:]
		if size > uint64(len(b)) {
			return f, nil, reasonTruncated
		}
		f.body = b[:size:size]
		return f, b[size:], ""
	case wireFixed64:
		if len(b) < 8 {
			return f, nil, reasonTruncated
		}
		return f, b[8:], ""
	case wireFixed32:
		if len(b) < 4 {
			return f, nil, reasonTruncated
		}
		return f, b[4:], ""
	}
	return f, nil, "unsupported wire type"
}

// varintLen is the encoded size of v as a varint.
func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// appendVarint appends v to b as a varint.
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendTag appends the key of field num with wire type typ.
func appendTag(b []byte, num uint64, typ uint8) []byte {
	return appendVarint(b, num<<3|uint64(typ))
}

// bytesFieldLen is the encoded size of a length-delimited field with a
// one-byte key (field numbers below 16) and a payload of n bytes.
func bytesFieldLen(n int) int {
	return 1 + varintLen(uint64(n)) + n
}
