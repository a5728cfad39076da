package kinesisfake

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"math/bits"
)

// hashKey is a 128-bit Kinesis hash key. Partition keys map to hash keys
// through MD5; every open shard owns a contiguous range of them.
type hashKey struct{ hi, lo uint64 }

var maxHashKey = hashKey{^uint64(0), ^uint64(0)}

func (a hashKey) cmp(b hashKey) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

func (a hashKey) add1() hashKey {
	lo, c := bits.Add64(a.lo, 1, 0)
	return hashKey{a.hi + c, lo}
}

func (a hashKey) sub1() hashKey {
	lo, b := bits.Sub64(a.lo, 1, 0)
	return hashKey{a.hi - b, lo}
}

// mid returns the first key of the upper half of [a, b].
func mid(a, b hashKey) hashKey {
	// (b - a + 1) / 2 + a, computed without overflowing 128 bits.
	lo, borrow := bits.Sub64(b.lo, a.lo, 0)
	hi, _ := bits.Sub64(b.hi, a.hi, borrow)
	d := hashKey{hi, lo}.add1() // may wrap to 0 for the full range
	half := hashKey{d.hi >> 1, d.lo>>1 | d.hi<<63}
	if d == (hashKey{}) {
		half = hashKey{1 << 63, 0}
	}
	lo, c := bits.Add64(a.lo, half.lo, 0)
	return hashKey{a.hi + half.hi + c, lo}
}

func (a hashKey) big() *big.Int {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return new(big.Int).SetBytes(b[:])
}

func hashKeyFromBig(n *big.Int) hashKey {
	var b [16]byte
	n.FillBytes(b[:])
	return hashKey{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (a hashKey) String() string { return a.big().String() }

// parseHashKey parses a decimal hash key in [0, 2^128-1].
func parseHashKey(s string) (hashKey, bool) {
	if s == "" || len(s) > 39 {
		return hashKey{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return hashKey{}, false
		}
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.BitLen() > 128 {
		return hashKey{}, false
	}
	return hashKeyFromBig(n), true
}

// partitionHash maps a partition key to its hash key as Kinesis does: the MD5
// digest read as a big-endian 128-bit integer.
func partitionHash(pk string) hashKey {
	sum := md5.Sum([]byte(pk))
	return hashKey{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// evenStarts returns the first hash key of each of n shards that split the key
// space evenly: shard i starts at floor(i * 2^128 / n).
func evenStarts(n int) []hashKey {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	out := make([]hashKey, n)
	for i := range n {
		v := new(big.Int).Mul(space, big.NewInt(int64(i)))
		v.Quo(v, big.NewInt(int64(n)))
		out[i] = hashKeyFromBig(v)
	}
	return out
}
