package kpl

import (
	"crypto/md5"
	"errors"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// two128 is 2^128, the size of the hash key space.
var two128 = new(big.Int).Lsh(big.NewInt(1), 128)

// toBig converts k with math/big, the oracle for these tests.
func toBig(k HashKey) *big.Int {
	hi := new(big.Int).SetUint64(k.Hi)
	return hi.Lsh(hi, 64).Or(hi, new(big.Int).SetUint64(k.Lo))
}

func TestPartitionHashKeyKnownVector(t *testing.T) {
	// The MD5 of "partition-key-1" is 1919e33a21e68e961f03b16ba66b2376; read
	// as a big-endian integer it is the decimal below.
	const key, want = "partition-key-1", "33365116028791453877729010807000998774"
	sum := md5.Sum([]byte(key))
	if oracle := new(big.Int).SetBytes(sum[:]).String(); oracle != want {
		t.Fatalf("oracle %s, want %s", oracle, want)
	}
	k := PartitionHashKey(key)
	if k.String() != want || k != (HashKey{Hi: 0x1919e33a21e68e96, Lo: 0x1f03b16ba66b2376}) {
		t.Fatalf("PartitionHashKey = %s (%#x, %#x), want %s", k, k.Hi, k.Lo, want)
	}
	// Keys on both sides of the stack buffer's size hash the same way.
	for _, n := range []int{1, 31, 32, 33, 255, 256, 257, 1024} {
		key := strings.Repeat("é", n)[:n]
		sum := md5.Sum([]byte(key))
		if got, want := toBig(PartitionHashKey(key)), new(big.Int).SetBytes(sum[:]); got.Cmp(want) != 0 {
			t.Fatalf("key of %d bytes: %s, want %s", n, got, want)
		}
	}
	// The empty key is not special.
	if got := PartitionHashKey("").String(); got != "281949768489412648962353822266799178366" {
		t.Fatalf("hash key of the empty partition key = %s", got)
	}
}

func TestParseHashKey(t *testing.T) {
	valid := map[string]HashKey{
		"0": {},
		"00000000000000000000000000000000000000000000001": {Lo: 1},
		"18446744073709551615":                            {Lo: 1<<64 - 1},
		"18446744073709551616":                            {Hi: 1},
		"10000000000000000000":                            {Lo: 1e19},
		"340282366920938463463374607431768211455":         MaxHashKey,
		"170141183460469231731687303715884105728":         {Hi: 1 << 63},
	}
	for s, want := range valid {
		got, err := ParseHashKey(s)
		if err != nil || got != want {
			t.Errorf("ParseHashKey(%q) = %#v, %v; want %#v", s, got, err, want)
		}
	}
	invalid := []string{
		"", "-1", "+1", " 1", "1 ", "1a", "0x10", "1e3", "١",
		"340282366920938463463374607431768211456",  // 2^128
		"340282366920938463463374607431768211465",  // overflows in the last addition
		"3402823669209384634633746074317682114550", // ten times too large
		"999999999999999999999999999999999999999999999999999999",
	}
	for _, s := range invalid {
		if k, err := ParseHashKey(s); !errors.Is(err, ErrInvalidHashKey) {
			t.Errorf("ParseHashKey(%q) = %v, %v; want ErrInvalidHashKey", s, k, err)
		}
	}
}

func TestHashKeyStringAgreesWithBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []HashKey{{}, {Lo: 1}, {Lo: 1<<64 - 1}, {Hi: 1}, {Hi: 1, Lo: 1e19}, MaxHashKey,
		{Hi: 0x8AC7230489E80000 >> 1}, {Hi: 5, Lo: 0x8AC7230489E80000 - 1}}
	for range 2000 {
		keys = append(keys, HashKey{Hi: rng.Uint64() >> rng.IntN(64), Lo: rng.Uint64()})
	}
	for _, k := range keys {
		want := toBig(k).String()
		if got := k.String(); got != want {
			t.Fatalf("%#v.String() = %s, want %s", k, got, want)
		}
		if back, err := ParseHashKey(want); err != nil || back != k {
			t.Fatalf("ParseHashKey(%s) = %#v, %v; want %#v", want, back, err, k)
		}
	}
}

func TestHashKeyCmp(t *testing.T) {
	ordered := []HashKey{{}, {Lo: 1}, {Lo: 1<<64 - 1}, {Hi: 1}, {Hi: 1, Lo: 1}, {Hi: 2}, MaxHashKey}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Cmp(b); got != want {
				t.Fatalf("%v.Cmp(%v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestHashKeyRangeBoundaries(t *testing.T) {
	full, err := ParseHashKeyRange("0", "340282366920938463463374607431768211455")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []HashKey{{}, MaxHashKey, {Hi: 1 << 63}} {
		if !full.Contains(k) {
			t.Fatalf("the whole key space does not contain %v", k)
		}
	}

	// A shard of a two-shard split whose ends sit at the 64-bit word edge,
	// where an off-by-one in the low word would show.
	lower, err := ParseHashKeyRange("0", "18446744073709551615") // [0, 2^64-1]
	if err != nil {
		t.Fatal(err)
	}
	upper, err := ParseHashKeyRange("18446744073709551616", "340282366920938463463374607431768211455") // [2^64, 2^128-1]
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		k            HashKey
		inLow, inUpp bool
	}{
		{HashKey{}, true, false},
		{HashKey{Lo: 1<<64 - 1}, true, false},
		{HashKey{Hi: 1}, false, true},
		{HashKey{Hi: 1, Lo: 1}, false, true},
		{MaxHashKey, false, true},
	}
	for _, c := range cases {
		if lower.Contains(c.k) != c.inLow || upper.Contains(c.k) != c.inUpp {
			t.Fatalf("%v: lower %v upper %v; want %v %v", c.k, lower.Contains(c.k), upper.Contains(c.k), c.inLow, c.inUpp)
		}
	}

	// Both ends are inclusive; the neighbours outside are not.
	mid, err := ParseHashKeyRange("85070591730234615865843651857942052864", "170141183460469231731687303715884105727")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{
		"85070591730234615865843651857942052863":  false,
		"85070591730234615865843651857942052864":  true,
		"170141183460469231731687303715884105727": true,
		"170141183460469231731687303715884105728": false,
	} {
		key, _ := ParseHashKey(k)
		if mid.Contains(key) != want {
			t.Fatalf("Contains(%s) = %v, want %v", k, !want, want)
		}
	}

	// A range of one key.
	one, err := ParseHashKeyRange("7", "7")
	if err != nil || !one.Contains(HashKey{Lo: 7}) || one.Contains(HashKey{Lo: 6}) || one.Contains(HashKey{Lo: 8}) {
		t.Fatalf("single-key range: %v", err)
	}
}

func TestParseHashKeyRangeErrors(t *testing.T) {
	for _, c := range [][2]string{{"2", "1"}, {"", "1"}, {"0", "340282366920938463463374607431768211456"}, {"x", "y"}} {
		if _, err := ParseHashKeyRange(c[0], c[1]); !errors.Is(err, ErrInvalidHashKey) {
			t.Errorf("ParseHashKeyRange(%q, %q) = %v, want ErrInvalidHashKey", c[0], c[1], err)
		}
	}
}

func TestUserRecordHashKey(t *testing.T) {
	r := UserRecord{PartitionKey: "partition-key-1"}
	if k, err := r.HashKey(); err != nil || k != PartitionHashKey("partition-key-1") {
		t.Fatalf("without explicit hash key: %v, %v", k, err)
	}
	r.ExplicitHashKey = "18446744073709551616"
	if k, err := r.HashKey(); err != nil || k != (HashKey{Hi: 1}) {
		t.Fatalf("explicit hash key: %v, %v", k, err)
	}
	r.ExplicitHashKey = "340282366920938463463374607431768211456"
	if _, err := r.HashKey(); !IsCorrupt(err) {
		t.Fatalf("explicit hash key 2^128: err = %v, want a *CorruptError", err)
	}
}

func TestHashKeyAllocations(t *testing.T) {
	r := UserRecord{PartitionKey: "4f8a1c2e-9b3d-4e7f-a6c5-0d1e2f3a4b5c"}
	e := UserRecord{PartitionKey: "p", ExplicitHashKey: "170141183460469231731687303715884105728"}
	rng, _ := ParseHashKeyRange("0", "170141183460469231731687303715884105727")
	allocs := testing.AllocsPerRun(100, func() {
		k1, _ := r.HashKey()
		k2, _ := e.HashKey()
		_ = rng.Contains(k1) || rng.Contains(k2)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record, want 0", allocs)
	}
}
