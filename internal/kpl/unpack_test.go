package kpl

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

func TestUnpackRoundTrip(t *testing.T) {
	many := make([]UserRecord, 300) // indexes above 127 need two-byte varints
	for i := range many {
		many[i] = UserRecord{PartitionKey: fmt.Sprintf("pk-%d", i), Data: []byte(fmt.Sprint(i))}
	}
	cases := map[string][]UserRecord{
		"one": {{PartitionKey: "a", Data: []byte("x")}},
		"shared keys": {
			{PartitionKey: "k1", Data: []byte("one")},
			{PartitionKey: "k2", Data: []byte("two")},
			{PartitionKey: "k1", Data: []byte("three")},
		},
		"explicit hash keys": {
			{PartitionKey: "k", ExplicitHashKey: "0", Data: []byte("lowest")},
			{PartitionKey: "k", Data: []byte("none")},
			{PartitionKey: "k", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte("highest")},
			{PartitionKey: "j", ExplicitHashKey: "0", Data: []byte("lowest again")},
		},
		"empty and nil data": {
			{PartitionKey: "a", Data: []byte{}},
			{PartitionKey: "b", Data: nil},
		},
		"large data": {
			{PartitionKey: "a", Data: bytes.Repeat([]byte{0xAB}, 128)},
			{PartitionKey: "b", Data: bytes.Repeat([]byte{0xCD}, 16384)},
			{PartitionKey: "c", Data: bytes.Repeat([]byte{0xEF}, 300000)},
		},
		"unicode and empty keys": {
			{PartitionKey: "clé-ключ-鍵", Data: []byte("u")},
			{PartitionKey: "", Data: []byte("e")},
		},
		"many": many,
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			a := mustPack(t, recs)
			got, agg, err := Unpack(nil, a.Data)
			if err != nil || !agg {
				t.Fatalf("Unpack = aggregated %v, %v", agg, err)
			}
			sameRecords(t, got, recs)
		})
	}
}

func TestUnpackPlainRecords(t *testing.T) {
	valid := mustPack(t, []UserRecord{{PartitionKey: "a", Data: []byte("x")}}).Data
	plain := map[string][]byte{
		"nil":                nil,
		"empty":              {},
		"text":               []byte(`{"order": 1}`),
		"magic only":         valid[:4],
		"magic and 15 bytes": valid[:19],
		"magic misplaced":    append([]byte{0}, valid...),
		"three magic bytes":  append([]byte{0xF3, 0x89, 0x9A, 0xC3}, valid[4:]...),
	}
	for name, data := range plain {
		t.Run(name, func(t *testing.T) {
			dst := make([]UserRecord, 1, 4)
			got, agg, err := Unpack(dst, data)
			if agg || err != nil || IsAggregated(data) {
				t.Fatalf("aggregated %v, err %v; want a plain record", agg, err)
			}
			if len(got) != 1 || &got[0] != &dst[0] {
				t.Fatal("dst was changed")
			}
		})
	}
}

func TestUnpackEmptyAggregate(t *testing.T) {
	// Only the framing: an empty message and the MD5 of nothing.
	empty := frame(nil)
	if len(empty) != Overhead {
		t.Fatalf("len = %d", len(empty))
	}
	// Tables but no records.
	tablesOnly := frame(cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("12"))))
	for name, data := range map[string][]byte{"empty": empty, "tables only": tablesOnly} {
		t.Run(name, func(t *testing.T) {
			got, agg, err := Unpack(nil, data)
			if !agg || err != nil || len(got) != 0 {
				t.Fatalf("got %d records, aggregated %v, err %v; want 0, true, nil", len(got), agg, err)
			}
		})
	}
}

func TestUnpackAliasesInputAndAppends(t *testing.T) {
	recs := []UserRecord{{PartitionKey: "a", Data: []byte("first")}, {PartitionKey: "a", Data: []byte("second")}}
	data := mustPack(t, recs).Data
	prior := UserRecord{PartitionKey: "earlier"}
	got, _, err := Unpack([]UserRecord{prior}, data)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].PartitionKey != prior.PartitionKey {
		t.Fatal("existing element of dst was changed")
	}
	sameRecords(t, got[1:], recs)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	for i, r := range got[1:] {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data)))
		if p < start || p+uintptr(len(r.Data)) > start+uintptr(len(data)) {
			t.Fatalf("record %d: Data is a copy, want a slice of the input", i)
		}
		if cap(r.Data) != len(r.Data) {
			t.Fatalf("record %d: cap %d > len %d: appending would overwrite the aggregate", i, cap(r.Data), len(r.Data))
		}
	}
}

func TestUnpackerReuse(t *testing.T) {
	var u Unpacker
	first := []UserRecord{{PartitionKey: "a", ExplicitHashKey: "5", Data: []byte("1")}, {PartitionKey: "b", Data: []byte("2")}}
	second := []UserRecord{{PartitionKey: "c", Data: []byte("3")}}
	for range 3 {
		for _, recs := range [][]UserRecord{first, second} {
			got, _, err := u.Unpack(nil, mustPack(t, recs).Data)
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, got, recs)
		}
		// A corrupt aggregate in between must not disturb the next one.
		if _, _, err := u.Unpack(nil, frame(pbBytes(1, []byte("k"))[:2])); !IsCorrupt(err) {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestUnpackAllocations(t *testing.T) {
	recs := make([]UserRecord, 50)
	for i := range recs {
		recs[i] = UserRecord{PartitionKey: fmt.Sprintf("key-%d", i), Data: make([]byte, 200)}
	}
	data := mustPack(t, recs).Data
	var u Unpacker
	dst := make([]UserRecord, 0, len(recs))
	u.Unpack(dst, data) // size the scratch space
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := u.Unpack(dst[:0], data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per aggregate, want 1 (the keys)", allocs)
	}
}

// TestUnpackCorrupt feeds one aggregate per corruption class, with a valid
// digest unless the digest is the point, and checks the error and its reason.
func TestUnpackCorrupt(t *testing.T) {
	rec := pbBytes(3, pbRecord(0, -1, "d"))
	pk := pbBytes(1, []byte("k"))
	valid := frame(cat(pk, rec))
	badDigest := bytes.Clone(valid)
	badDigest[len(badDigest)-1] ^= 1
	badBody := bytes.Clone(valid)
	badBody[len(badBody)-17] ^= 1 // the last byte of the data "d"
	overlong := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}

	cases := []struct {
		name, reason string
		data         []byte
	}{
		{"digest altered", "md5 mismatch", badDigest},
		{"message altered", "md5 mismatch", badBody},
		{"digest of magic included", "md5 mismatch", func() []byte {
			msg := cat(pk, rec)
			sum := md5.Sum(append([]byte{0xF3, 0x89, 0x9A, 0xC2}, msg...))
			return append(append([]byte{0xF3, 0x89, 0x9A, 0xC2}, msg...), sum[:]...)
		}()},
		{"table entry past the end", "truncated protobuf", frame([]byte{0x0A, 0x05, 'k'})},
		{"record past the end", "truncated protobuf", frame(cat(pk, []byte{0x1A, 0x7F, 0x08}))},
		{"length near 2^64", "truncated protobuf", frame(cat(pk, []byte{0x1A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}))},
		{"tag cut inside", "truncated protobuf", frame(cat(pk, rec, []byte{0x80}))},
		{"varint value missing", "truncated protobuf", frame(cat(pk, []byte{0x08}))},
		{"data past record end", "record 0: truncated protobuf", frame(cat(pk, pbBytes(3, []byte{0x08, 0x00, 0x1A, 0x09, 'd'})))},
		{"fixed64 cut", "truncated protobuf", frame([]byte{0x79, 1, 2, 3})},
		{"fixed32 cut", "truncated protobuf", frame([]byte{0x7D, 1, 2})},
		{"overlong tag", "overlong varint", frame(cat(pk, overlong))},
		{"tenth byte above 1", "overlong varint", frame(cat(pk, []byte{0x1A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02}))},
		{"overlong index", "record 0: overlong varint", frame(cat(pk, pbBytes(3, cat([]byte{0x08}, overlong, pbBytes(3, nil)))))},
		{"field number 0", "invalid field number", frame(cat(pk, []byte{0x02, 0x00}, rec))},
		{"field number above 2^29-1", "invalid field number", frame(cat(pk, []byte{0x80, 0x80, 0x80, 0x80, 0x20, 0x00}))},
		{"group", "unsupported wire type", frame(cat(pk, []byte{0x0B}))},
		{"wire type 7", "unsupported wire type", frame(cat(pk, []byte{0x0F}))},
		{"partition key table as varint", "field partition_key_table has wire type 0, want 2", frame(cat([]byte{0x08, 0x01}, rec))},
		{"hash key table as fixed32", "field explicit_hash_key_table has wire type 5, want 2", frame(cat(pk, []byte{0x15, 1, 2, 3, 4}, rec))},
		{"records as varint", "field records has wire type 0, want 2", frame(cat(pk, []byte{0x18, 0x00}))},
		{"partition key index as bytes", "record 0: field partition_key_index has wire type 2, want 0", frame(cat(pk, pbBytes(3, cat(pbBytes(1, nil), pbBytes(3, nil)))))},
		{"hash key index as bytes", "record 0: field explicit_hash_key_index has wire type 2, want 0", frame(cat(pk, pbBytes(3, cat(pbVarint(1, 0), pbBytes(2, nil), pbBytes(3, nil)))))},
		{"data as varint", "record 0: field data has wire type 0, want 2", frame(cat(pk, pbBytes(3, cat(pbVarint(1, 0), pbVarint(3, 0)))))},
		{"tags as varint", "record 0: field tags has wire type 0, want 2", frame(cat(pk, pbBytes(3, cat(pbRecord(0, -1, "d"), pbVarint(4, 1)))))},
		{"missing partition key index", "record 0: missing required field partition_key_index", frame(cat(pk, pbBytes(3, pbBytes(3, []byte("d")))))},
		{"missing data", "record 0: missing required field data", frame(cat(pk, pbBytes(3, pbVarint(1, 0))))},
		{"missing data in second record", "record 1: missing required field data", frame(cat(pk, rec, pbBytes(3, pbVarint(1, 0))))},
		{"partition key index out of range", "record 0: partition key index 7 out of range (table has 3)",
			frame(cat(pk, pbBytes(1, []byte("k2")), pbBytes(1, []byte("k3")), pbBytes(3, pbRecord(7, -1, "d"))))},
		{"no partition key table", "record 0: partition key index 0 out of range (table has 0)", frame(rec)},
		{"partition key index 2^64-1", "record 0: partition key index 18446744073709551615 out of range (table has 1)",
			frame(cat(pk, pbBytes(3, pbRecord(1<<64-1, -1, "d"))))},
		{"hash key index out of range", "record 1: explicit hash key index 1 out of range (table has 1)",
			frame(cat(pk, pbBytes(2, []byte("1")), pbBytes(3, pbRecord(0, 0, "a")), pbBytes(3, pbRecord(0, 1, "b"))))},
		{"hash key index with no table", "record 0: explicit hash key index 0 out of range (table has 0)", frame(cat(pk, pbBytes(3, pbRecord(0, 0, "d"))))},
		{"hash key not decimal", `explicit hash key table entry 1 ("0x10") is not a decimal integer below 2^128`,
			frame(cat(pk, pbBytes(2, []byte("1")), pbBytes(2, []byte("0x10")), rec))},
		{"hash key empty", `explicit hash key table entry 0 ("") is not`, frame(cat(pk, pbBytes(2, nil), rec))},
		{"hash key negative", `("-1") is not`, frame(cat(pk, pbBytes(2, []byte("-1")), rec))},
		{"hash key 2^128", `("340282366920938463463374607431768211456") is not`,
			frame(cat(pk, pbBytes(2, []byte("340282366920938463463374607431768211456")), rec))},
		{"tag without key", "record 0: tag: missing required field key", frame(cat(pk, pbBytes(3, cat(pbRecord(0, -1, "d"), pbBytes(4, pbBytes(2, []byte("v")))))))},
		{"tag key as varint", "record 0: tag: wrong wire type", frame(cat(pk, pbBytes(3, cat(pbRecord(0, -1, "d"), pbBytes(4, pbVarint(1, 3))))))},
		{"tag truncated", "record 0: tag: truncated protobuf", frame(cat(pk, pbBytes(3, cat(pbRecord(0, -1, "d"), pbBytes(4, []byte{0x0A, 0x04, 'k'})))))},
	}
	if _, _, err := Unpack(nil, valid); err != nil {
		t.Fatalf("the uncorrupted aggregate fails: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []UserRecord{{PartitionKey: "kept"}}
			got, agg, err := Unpack(dst, c.data)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CorruptError", err)
			}
			if !agg {
				t.Fatal("aggregated = false for a corrupt aggregate")
			}
			if len(got) != 1 || got[0].PartitionKey != "kept" {
				t.Fatalf("dst changed to %d records: partial output", len(got))
			}
			if !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("reason %q, want it to contain %q", ce.Reason, c.reason)
			}
		})
	}
}

// TestUnpackTruncated cuts a valid aggregate at every byte offset. Cut as a
// whole, it is plain when too short and otherwise fails the digest check. Cut
// inside the message with the digest recomputed, it must fail as truncated
// unless the cut falls between top-level fields: then it is a valid, shorter
// aggregate holding a prefix of the records.
func TestUnpackTruncated(t *testing.T) {
	recs := []UserRecord{
		{PartitionKey: "alpha", ExplicitHashKey: "170141183460469231731687303715884105728", Data: []byte("first record")},
		{PartitionKey: "beta", Data: bytes.Repeat([]byte("b"), 200)},
		{PartitionKey: "alpha", Data: []byte("third")},
	}
	data := mustPack(t, recs).Data
	for n := range len(data) {
		got, agg, err := Unpack(nil, data[:n])
		switch {
		case n < Overhead:
			if agg || err != nil {
				t.Fatalf("cut at %d: aggregated %v, err %v; want plain", n, agg, err)
			}
		case !IsCorrupt(err) || len(got) != 0:
			t.Fatalf("cut at %d: %d records, err %v; want md5 mismatch", n, len(got), err)
		}
	}

	msg := data[4 : len(data)-16]
	boundary := map[int]int{0: 0} // offset -> records wholly before it
	records := 0
	for _, f := range walkTop(t, msg) {
		if f.num == 3 {
			records++
		}
		boundary[f.end] = records
	}
	for n := range len(msg) {
		got, _, err := Unpack(nil, frame(msg[:n]))
		prefix, ok := boundary[n]
		if !ok {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Reason != "truncated protobuf" || len(got) != 0 {
				t.Fatalf("message cut at %d: %d records, err %v; want truncated protobuf", n, len(got), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("message cut at field boundary %d: %v", n, err)
		}
		sameRecords(t, got, recs[:prefix])
	}
}

func TestUnpackProtobufLeniency(t *testing.T) {
	want := []UserRecord{{PartitionKey: "k", ExplicitHashKey: "42", Data: []byte("d")}}
	unknown := cat(pbVarint(15, 9), []byte{0x79, 1, 2, 3, 4, 5, 6, 7, 8}, []byte{0x7D, 1, 2, 3, 4}, pbBytes(16, []byte("future")))
	cases := map[string][]byte{
		"canonical": cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("42")), pbBytes(3, pbRecord(0, 0, "d"))),
		"unknown fields everywhere": cat(unknown, pbBytes(1, []byte("k")), unknown, pbBytes(2, []byte("42")),
			pbBytes(3, cat(unknown, pbRecord(0, 0, "d"), unknown)), unknown),
		"records before tables": cat(pbBytes(3, pbRecord(0, 0, "d")), pbBytes(2, []byte("42")), pbBytes(1, []byte("k"))),
		"fields reordered in record": cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("42")),
			pbBytes(3, cat(pbBytes(3, []byte("d")), pbVarint(2, 0), pbVarint(1, 0)))),
		"last value wins": cat(pbBytes(1, []byte("x")), pbBytes(1, []byte("k")), pbBytes(2, []byte("1")), pbBytes(2, []byte("42")),
			pbBytes(3, cat(pbVarint(1, 0), pbBytes(3, []byte("old")), pbVarint(2, 0), pbRecord(1, 1, "d")))),
		"redundant varint bytes": cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("42")),
			pbBytes(3, []byte{0x08, 0x80, 0x00, 0x10, 0x80, 0x80, 0x00, 0x1A, 0x81, 0x00, 'd'})),
		"tags": cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("42")),
			pbBytes(3, cat(pbRecord(0, 0, "d"), pbBytes(4, pbBytes(1, []byte("key"))), pbBytes(4, cat(pbBytes(1, []byte("a")), pbBytes(2, []byte("b"))))))),
		"leading zeros in hash key": cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("42")), pbBytes(2, []byte("0042")), pbBytes(3, pbRecord(0, 0, "d"))),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			got, agg, err := Unpack(nil, frame(msg))
			if err != nil || !agg {
				t.Fatalf("aggregated %v, err %v", agg, err)
			}
			sameRecords(t, got, want)
		})
	}
}

// TestUnpackEmptyKeys is a regression test found by FuzzUnpack: when every
// key of an aggregate was empty, Unpack skipped building the key string but
// left the table spans pointing into the message, and slicing the empty key
// string with them panicked.
func TestUnpackEmptyKeys(t *testing.T) {
	recs := []UserRecord{{PartitionKey: "", Data: []byte("a")}, {PartitionKey: "", Data: nil}}
	got, _, err := Unpack(nil, mustPack(t, recs).Data)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, recs)
}

// Open checks an aggregate whole and decodes each user record on demand: the
// same records, keys and aliasing as Unpack, one at a time, in any order.
func TestOpenDecodesEachUserRecordOnDemand(t *testing.T) {
	recs := []UserRecord{
		{PartitionKey: "a", ExplicitHashKey: "5", Data: []byte("first")},
		{PartitionKey: "b", Data: []byte("")},
		{PartitionKey: "a", Data: []byte("third")},
	}
	data := mustPack(t, recs).Data
	var u Unpacker
	a, agg, err := u.Open(data)
	if err != nil || !agg || a.Len() != len(recs) {
		t.Fatalf("Open: %d records, aggregated %v, err %v; want %d, true, nil", a.Len(), agg, err, len(recs))
	}
	for _, i := range []int{2, 0, 1, 2} {
		got, want := a.Record(i), recs[i]
		if got.PartitionKey != want.PartitionKey || got.ExplicitHashKey != want.ExplicitHashKey ||
			!bytes.Equal(got.Data, want.Data) || got.SubSequence != uint64(i) {
			t.Fatalf("record %d = %+v, want %+v with sub-sequence %d", i, got, want, i)
		}
		if cap(got.Data) != len(got.Data) {
			t.Fatalf("record %d: cap %d > len %d: appending would overwrite the aggregate", i, cap(got.Data), len(got.Data))
		}
	}
	if a, agg, err := u.Open([]byte("plain")); err != nil || agg || a.Len() != 0 {
		t.Fatalf("plain data: %d records, aggregated %v, err %v; want 0, false, nil", a.Len(), agg, err)
	}
	corrupt := append([]byte(nil), data...)
	corrupt[len(corrupt)-1] ^= 0xff
	if a, agg, err := u.Open(corrupt); !IsCorrupt(err) || !agg || a.Len() != 0 {
		t.Fatalf("corrupt aggregate: %d records, aggregated %v, err %v; want 0, true, a *CorruptError", a.Len(), agg, err)
	}
}

// One Kinesis record of 1 MB can hold 166,650 empty user records. Unpack
// decodes them all at once, 64 bytes each before any is handed out (and a
// reader that converted them whole held a message of about 1 KiB for each:
// 223 MB of RSS for one such record). Open indexes them in 16 bytes each, in
// an index the Unpacker reuses, and allocates only the keys.
func TestOpenIndexesManyEmptyUserRecordsCompactly(t *testing.T) {
	const n = 166_650
	var b Builder
	for range n {
		if err := b.Add(UserRecord{PartitionKey: "k", Data: []byte{}}); err != nil {
			t.Fatal(err)
		}
	}
	agg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if size := len(agg.Data) + len(agg.PartitionKey); size > MaxRecordSize {
		t.Fatalf("the aggregate is %d bytes, over the Kinesis record limit", size)
	}
	var u Unpacker
	a, _, err := u.Open(agg.Data)
	if err != nil || a.Len() != n {
		t.Fatalf("Open: %d records, err %v; want %d", a.Len(), err, n)
	}
	if last := a.Record(n - 1); last.SubSequence != n-1 || last.PartitionKey != "k" || len(last.Data) != 0 {
		t.Fatalf("the last user record is %+v", last)
	}
	if size := unsafe.Sizeof(entry{}); size != 16 {
		t.Fatalf("an index entry takes %d bytes, want 16", size)
	}
	allocs := testing.AllocsPerRun(5, func() {
		if _, _, err := u.Open(agg.Data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per Open of a reused Unpacker, want 1 (the keys)", allocs)
	}
}
