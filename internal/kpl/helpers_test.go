package kpl

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"testing"
)

// The helpers below encode and walk protocol buffers with encoding/binary's
// varint functions rather than the package's own, so that the tests do not
// use the code under test as their oracle.

// frame wraps a protocol buffer message in the aggregate framing.
func frame(msg []byte) []byte {
	out := append([]byte{0xF3, 0x89, 0x9A, 0xC2}, msg...)
	sum := md5.Sum(msg)
	return append(out, sum[:]...)
}

// pbBytes encodes a length-delimited field.
func pbBytes(num uint64, payload []byte) []byte {
	b := binary.AppendUvarint(nil, num<<3|2)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// pbVarint encodes a varint field.
func pbVarint(num, v uint64) []byte {
	b := binary.AppendUvarint(nil, num<<3)
	return binary.AppendUvarint(b, v)
}

// cat concatenates encoded fields.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// pbRecord encodes a Record message body with a partition key index, data
// and, when ehk >= 0, an explicit hash key index.
func pbRecord(pk uint64, ehk int, data string) []byte {
	b := pbVarint(1, pk)
	if ehk >= 0 {
		b = append(b, pbVarint(2, uint64(ehk))...)
	}
	return append(b, pbBytes(3, []byte(data))...)
}

// topField is one top-level field of a message, found by walkTop.
type topField struct {
	num        uint64
	start, end int // offsets of the whole field in the message
}

// walkTop splits a well-formed message into its top-level fields. It handles
// only the wire types Pack writes (varint and length-delimited).
func walkTop(t *testing.T, msg []byte) []topField {
	t.Helper()
	var out []topField
	for off := 0; off < len(msg); {
		tag, n := binary.Uvarint(msg[off:])
		if n <= 0 {
			t.Fatalf("walkTop: bad tag at %d", off)
		}
		p := off + n
		switch tag & 7 {
		case 0:
			_, m := binary.Uvarint(msg[p:])
			p += m
		case 2:
			l, m := binary.Uvarint(msg[p:])
			p += m + int(l)
		default:
			t.Fatalf("walkTop: wire type %d", tag&7)
		}
		out = append(out, topField{num: tag >> 3, start: off, end: p})
		off = p
	}
	return out
}

// countTop counts the top-level fields numbered num in an aggregate's data.
func countTop(t *testing.T, data []byte, num uint64) int {
	t.Helper()
	n := 0
	for _, f := range walkTop(t, data[4:len(data)-16]) {
		if f.num == num {
			n++
		}
	}
	return n
}

// sameRecords fails t unless got and want hold the same keys and data, with
// sub-sequence numbers 0, 1, 2, ...
func sameRecords(t *testing.T, got, want []UserRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.PartitionKey != w.PartitionKey || g.ExplicitHashKey != w.ExplicitHashKey ||
			!bytes.Equal(g.Data, w.Data) || g.SubSequence != uint64(i) {
			t.Fatalf("record %d = {%q %q %q %d}, want {%q %q %q %d}", i,
				g.PartitionKey, g.ExplicitHashKey, g.Data, g.SubSequence,
				w.PartitionKey, w.ExplicitHashKey, w.Data, i)
		}
	}
}

// mustPack packs records or fails t.
func mustPack(t testing.TB, records []UserRecord) Aggregate {
	t.Helper()
	a, err := Pack(records)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
