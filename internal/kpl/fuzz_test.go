package kpl

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed files of testdata/fuzz/FuzzUnpack")

// FuzzUnpack checks that no input panics Unpack, that its three outcomes
// (plain, records, *CorruptError) are consistent, and that whatever unpacks
// packs again into an aggregate holding the same records.
//
// A mutated aggregate almost always fails its MD5 check, which would keep the
// fuzzer out of the decoder. So each input is also tried with its digest
// repaired: an aggregate's message is framed again with a correct digest, and
// any other input is framed whole as a message.
func FuzzUnpack(f *testing.F) {
	// The seeds are the checked-in corpus in testdata/fuzz/FuzzUnpack; see
	// seedCorpus and TestSeedCorpus.
	f.Fuzz(func(t *testing.T, data []byte) {
		checkUnpack(t, data)
		if IsAggregated(data) {
			checkUnpack(t, frame(data[magicLen:len(data)-digestLen]))
		} else {
			checkUnpack(t, frame(data))
		}
	})
}

// checkUnpack is the property FuzzUnpack checks for one input.
func checkUnpack(t *testing.T, data []byte) {
	var u Unpacker
	prior := []UserRecord{{PartitionKey: "prior"}}
	recs, agg, err := u.Unpack(prior, data)
	if len(recs) < 1 || recs[0].PartitionKey != "prior" {
		t.Fatal("dst's existing records were changed")
	}
	recs = recs[1:]
	if agg != IsAggregated(data) {
		t.Fatalf("aggregated %v, IsAggregated %v", agg, !agg)
	}
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Reason == "" || !agg || len(recs) != 0 {
			t.Fatalf("err %v (aggregated %v, %d records): want a *CorruptError with a reason and no records", err, agg, len(recs))
		}
		return
	}
	if !agg {
		if len(recs) != 0 {
			t.Fatal("records from a plain record")
		}
		return
	}
	for i := range recs {
		if recs[i].SubSequence != uint64(i) {
			t.Fatalf("record %d has sub-sequence %d", i, recs[i].SubSequence)
		}
		if _, err := recs[i].HashKey(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if len(recs) == 0 {
		return
	}
	a, err := Pack(recs)
	if err != nil {
		t.Fatalf("re-packing what unpacked: %v", err)
	}
	if a.PartitionKey != recs[0].PartitionKey || a.ExplicitHashKey != recs[0].ExplicitHashKey {
		t.Fatal("carrier keys are not the first record's")
	}
	again, agg, err := u.Unpack(nil, a.Data)
	if err != nil || !agg {
		t.Fatalf("unpacking the re-packed aggregate: aggregated %v, %v", agg, err)
	}
	sameRecords(t, again, recs)
}

// seedCorpus is the fuzzer's seed corpus: valid aggregates, edge cases, and
// one example of each corruption class.
func seedCorpus(t *testing.T) map[string][]byte {
	pack := func(recs ...UserRecord) []byte { return mustPack(t, recs).Data }
	rec := func(pk, ehk, data string) UserRecord {
		return UserRecord{PartitionKey: pk, ExplicitHashKey: ehk, Data: []byte(data)}
	}
	pk := pbBytes(1, []byte("k"))
	one := pbBytes(3, pbRecord(0, -1, "d"))
	many := make([]UserRecord, 140)
	for i := range many {
		many[i] = rec(fmt.Sprint("key-", i), "", fmt.Sprint("data-", i))
	}
	digest := pack(rec("a", "", "x"))
	digest[len(digest)-1] ^= 0xFF
	return map[string][]byte{
		"valid_one":                pack(rec("a", "", "x")),
		"valid_shared_keys":        pack(rec("k1", "", "one"), rec("k2", "", "two"), rec("k1", "", "three")),
		"valid_explicit_hash_keys": pack(rec("k", "0", "lo"), rec("k", "", "none"), rec("j", "340282366920938463463374607431768211455", "hi")),
		"valid_empty_data":         pack(rec("a", "", ""), rec("", "", "empty key")),
		"valid_140_records":        pack(many...),
		"valid_large_data":         pack(rec("a", "", string(bytes.Repeat([]byte{0, 1, 0xFF}, 100)))),
		"valid_unknown_fields":     frame(cat(pbVarint(15, 1), pk, pbBytes(16, []byte("x")), pbBytes(3, cat(pbRecord(0, -1, "d"), pbVarint(9, 9))))),
		"valid_records_first":      frame(cat(pbBytes(3, pbRecord(0, 0, "d")), pbBytes(2, []byte("42")), pk)),
		"valid_tags":               frame(cat(pk, pbBytes(3, cat(pbRecord(0, -1, "d"), pbBytes(4, cat(pbBytes(1, []byte("t")), pbBytes(2, []byte("v")))))))),
		"valid_redundant_varints":  frame(cat(pk, pbBytes(3, []byte{0x08, 0x80, 0x00, 0x1A, 0x81, 0x00, 'd'}))),
		"empty_aggregate":          frame(nil),
		"tables_only":              frame(cat(pk, pbBytes(2, []byte("7")))),
		"plain_empty":              {},
		"plain_text":               []byte(`{"order":1}`),
		"plain_magic_and_15_bytes": pack(rec("a", "", "x"))[:19],
		"corrupt_md5":              digest,
		"corrupt_truncated":        frame(cat(pk, one)[:6]),
		"corrupt_pk_out_of_range":  frame(cat(pk, pbBytes(3, pbRecord(7, -1, "d")))),
		"corrupt_ehk_out_of_range": frame(cat(pk, pbBytes(2, []byte("1")), pbBytes(3, pbRecord(0, 3, "d")))),
		"corrupt_wire_type":        frame(cat([]byte{0x08, 0x01}, one)),
		"corrupt_overlong_varint":  frame(cat(pk, []byte{0x1A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02})),
		"corrupt_missing_data":     frame(cat(pk, pbBytes(3, pbVarint(1, 0)))),
		"corrupt_missing_pk_index": frame(cat(pk, pbBytes(3, pbBytes(3, []byte("d"))))),
		"corrupt_bad_ehk":          frame(cat(pk, pbBytes(2, []byte("340282366920938463463374607431768211456")), one)),
		"corrupt_group":            frame(cat(pk, []byte{0x0B, 0x0C}, one)),
		"corrupt_tag_without_key":  frame(cat(pk, pbBytes(3, cat(pbRecord(0, -1, "d"), pbBytes(4, pbBytes(2, []byte("v"))))))),
	}
}

// TestSeedCorpus keeps the checked-in seed files equal to seedCorpus. Run
// `go test -run TestSeedCorpus -update-corpus ./internal/kpl` after changing
// the seeds or the encoding.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzUnpack")
	for name, data := range seedCorpus(t) {
		recs, agg, err := Unpack(nil, data)
		var ok bool
		switch prefix, _, _ := strings.Cut(name, "_"); prefix {
		case "valid":
			ok = agg && err == nil && len(recs) > 0
		case "plain":
			ok = !agg && err == nil
		case "corrupt":
			ok = IsCorrupt(err)
		default: // aggregates holding no records
			ok = agg && err == nil && len(recs) == 0
		}
		if !ok {
			t.Errorf("seed %s: %d records, aggregated %v, err %v: not what its name says", name, len(recs), agg, err)
		}
		path := filepath.Join(dir, "seed_"+name)
		want := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is missing or stale (%v); run with -update-corpus", path, err)
		}
	}
}
