package kinesisfake

import (
	"encoding/binary"
	"math/big"
	"math/bits"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// hashKey is a 128-bit Kinesis hash key (kpl's): partition keys map to hash
// keys through MD5; every open shard owns a contiguous range of them. The
// arithmetic that splitting and even ranges need is here.
type hashKey = kpl.HashKey

var maxHashKey = kpl.MaxHashKey

func add1(a hashKey) hashKey {
	lo, c := bits.Add64(a.Lo, 1, 0)
	return hashKey{Hi: a.Hi + c, Lo: lo}
}

func sub1(a hashKey) hashKey {
	lo, b := bits.Sub64(a.Lo, 1, 0)
	return hashKey{Hi: a.Hi - b, Lo: lo}
}

// mid returns the first key of the upper half of [a, b].
func mid(a, b hashKey) hashKey {
	// (b - a + 1) / 2 + a, computed without overflowing 128 bits.
	lo, borrow := bits.Sub64(b.Lo, a.Lo, 0)
	hi, _ := bits.Sub64(b.Hi, a.Hi, borrow)
	d := add1(hashKey{Hi: hi, Lo: lo}) // may wrap to 0 for the full range
	half := hashKey{Hi: d.Hi >> 1, Lo: d.Lo>>1 | d.Hi<<63}
	if d == (hashKey{}) {
		half = hashKey{Hi: 1 << 63}
	}
	lo, c := bits.Add64(a.Lo, half.Lo, 0)
	return hashKey{Hi: a.Hi + half.Hi + c, Lo: lo}
}

// parseHashKey parses a decimal hash key in [0, 2^128-1].
func parseHashKey(s string) (hashKey, bool) {
	k, err := kpl.ParseHashKey(s)
	return k, err == nil
}

// partitionHash maps a partition key to its hash key as Kinesis does.
func partitionHash(pk string) hashKey { return kpl.PartitionHashKey(pk) }

// evenStarts returns the first hash key of each of n shards that split the key
// space evenly: shard i starts at floor(i * 2^128 / n).
func evenStarts(n int) []hashKey {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	out := make([]hashKey, n)
	var b [16]byte
	for i := range n {
		v := new(big.Int).Mul(space, big.NewInt(int64(i)))
		v.Quo(v, big.NewInt(int64(n)))
		v.FillBytes(b[:])
		out[i] = hashKey{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
	}
	return out
}
