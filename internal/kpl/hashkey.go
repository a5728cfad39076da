package kpl

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
)

// HashKey is a point of the 128-bit hash key space that Kinesis divides among
// the shards of a stream: Hi holds the most significant 64 bits. The zero
// value is hash key 0. HashKey is comparable, so == tests equality.
type HashKey struct {
	Hi, Lo uint64
}

// MaxHashKey is the largest hash key, 2^128-1.
var MaxHashKey = HashKey{Hi: ^uint64(0), Lo: ^uint64(0)}

// PartitionHashKey is the hash key Kinesis assigns to partitionKey: the MD5
// digest of its UTF-8 bytes read as an unsigned big-endian integer.
func PartitionHashKey(partitionKey string) HashKey {
	// Converting the key to []byte would allocate for keys over 32 bytes;
	// copying it to the stack does not. Kinesis keys are 256 characters at
	// most, so the slow path is for keys that only hand-built records hold.
	var buf [256]byte
	var sum [md5.Size]byte
	if len(partitionKey) <= len(buf) {
		sum = md5.Sum(buf[:copy(buf[:], partitionKey)])
	} else {
		sum = md5.Sum([]byte(partitionKey))
	}
	return HashKey{
		Hi: binary.BigEndian.Uint64(sum[:8]),
		Lo: binary.BigEndian.Uint64(sum[8:]),
	}
}

// ParseHashKey parses a hash key written in decimal, as Kinesis writes hash
// key ranges and explicit hash keys. It accepts one or more ASCII digits
// (leading zeros included) denoting a value below 2^128, and nothing else: no
// sign, no spaces. Its errors wrap ErrInvalidHashKey.
func ParseHashKey(s string) (HashKey, error) {
	k, ok := parseHashKey(s)
	if !ok {
		return HashKey{}, fmt.Errorf("%w %q: want a decimal integer in [0, 2^128)", ErrInvalidHashKey, clip(s))
	}
	return k, nil
}

// parseHashKey is ParseHashKey without the error value, for both strings and
// the byte slices of an aggregate. It consumes up to 19 digits at a time, the
// most that fit in a uint64.
func parseHashKey[T string | []byte](s T) (HashKey, bool) {
	if len(s) == 0 {
		return HashKey{}, false
	}
	var k HashKey
	for len(s) > 0 {
		m := min(len(s), 19)
		chunk, scale := uint64(0), uint64(1)
		for i := 0; i < m; i++ {
			d := s[i] - '0'
			if d > 9 {
				return HashKey{}, false
			}
			chunk = chunk*10 + uint64(d)
			scale *= 10
		}
		s = s[m:]
		// k = k*scale + chunk, failing on overflow past 128 bits.
		carryLo, lo := bits.Mul64(k.Lo, scale)
		over, hi := bits.Mul64(k.Hi, scale)
		if over != 0 {
			return HashKey{}, false
		}
		hi, c := bits.Add64(hi, carryLo, 0)
		if c != 0 {
			return HashKey{}, false
		}
		lo, c = bits.Add64(lo, chunk, 0)
		hi, c = bits.Add64(hi, 0, c)
		if c != 0 {
			return HashKey{}, false
		}
		k = HashKey{Hi: hi, Lo: lo}
	}
	return k, true
}

// Cmp returns -1, 0 or +1 as k is below, equal to or above o.
func (k HashKey) Cmp(o HashKey) int {
	switch {
	case k.Hi < o.Hi:
		return -1
	case k.Hi > o.Hi:
		return 1
	case k.Lo < o.Lo:
		return -1
	case k.Lo > o.Lo:
		return 1
	}
	return 0
}

// String writes k in decimal without leading zeros, the form Kinesis uses.
func (k HashKey) String() string {
	if k.Hi == 0 {
		return strconv.FormatUint(k.Lo, 10)
	}
	const chunk = 1e19 // the largest power of ten below 2^64
	var tail [38]byte  // at most two chunks follow the leading digits
	i := len(tail)
	for k.Hi != 0 {
		q, r := bits.Div64(k.Hi%chunk, k.Lo, chunk)
		k = HashKey{Hi: k.Hi / chunk, Lo: q}
		for range 19 {
			i--
			tail[i] = byte('0' + r%10)
			r /= 10
		}
	}
	out := strconv.AppendUint(make([]byte, 0, 39), k.Lo, 10)
	return string(append(out, tail[i:]...))
}

// HashKeyRange is the inclusive range of hash keys a shard owns, as Kinesis
// reports it in a shard's HashKeyRange.
type HashKeyRange struct {
	Start, End HashKey
}

// ParseHashKeyRange parses a shard's StartingHashKey and EndingHashKey, as
// returned by ListShards, once, so that Contains costs two comparisons. It
// fails if either is not a valid hash key or if start is above end.
func ParseHashKeyRange(start, end string) (HashKeyRange, error) {
	s, err := ParseHashKey(start)
	if err != nil {
		return HashKeyRange{}, fmt.Errorf("starting hash key: %w", err)
	}
	e, err := ParseHashKey(end)
	if err != nil {
		return HashKeyRange{}, fmt.Errorf("ending hash key: %w", err)
	}
	if s.Cmp(e) > 0 {
		return HashKeyRange{}, fmt.Errorf("%w range: start %s is above end %s", ErrInvalidHashKey, start, end)
	}
	return HashKeyRange{Start: s, End: e}, nil
}

// Contains reports whether k lies in r, both ends included.
func (r HashKeyRange) Contains(k HashKey) bool {
	return r.Start.Cmp(k) <= 0 && k.Cmp(r.End) <= 0
}

// HashKey is the hash key that decides which shard r belongs to: its explicit
// hash key if it has one, else the MD5 hash key of its partition key. An
// explicit hash key that is not a decimal integer below 2^128 is reported as
// a *CorruptError (Unpack never returns such a record; one built by hand may).
func (r *UserRecord) HashKey() (HashKey, error) {
	if r.ExplicitHashKey == "" {
		return PartitionHashKey(r.PartitionKey), nil
	}
	k, ok := parseHashKey(r.ExplicitHashKey)
	if !ok {
		return HashKey{}, corruptf("explicit hash key %q is not a decimal integer below 2^128", clip(r.ExplicitHashKey))
	}
	return k, nil
}

// clip shortens s for an error message: hash keys are short, garbage may not
// be.
func clip[T string | []byte](s T) string {
	const max = 48
	if len(s) > max {
		return string(s[:max]) + "..."
	}
	return string(s)
}
