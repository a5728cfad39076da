package kinesisfake

import (
	"strconv"
)

// Sequence numbers are 56-digit decimal strings, like those AWS hands out:
//
//	"49" | counter (20 digits) | stream serial (6) | shard index (12) | filler (16)
//
// The counter is one per server and grows with every record and every shard
// opened or closed, so numbers are strictly increasing within a shard, a
// shard's StartingSequenceNumber is below each of its records, its
// EndingSequenceNumber is above them, and children start above their parents'
// ends. All numbers have the same length, so numeric order is string order.
// The stream serial and shard index let the fake tell which shard a number
// belongs to, as AWS does.
const (
	seqLen         = 56
	seqCounterBase = uint64(1_000_000_000_000_000_000)
)

func formatSeq(counter uint64, streamSerial, shardIndex int) string {
	b := make([]byte, 0, seqLen)
	b = append(b, '4', '9')
	b = appendPadded(b, counter, 20)
	b = appendPadded(b, uint64(streamSerial), 6)
	b = appendPadded(b, uint64(shardIndex), 12)
	// The filler only makes the numbers look less regular; it carries nothing.
	b = appendPadded(b, (counter*2654435761+uint64(shardIndex)*40503)%1e16, 16)
	return string(b)
}

func appendPadded(b []byte, v uint64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendUint(tmp[:0], v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

type seqParts struct {
	counter      uint64
	streamSerial int
	shardIndex   int
}

// parseSeq decodes a sequence number issued by this fake.
func parseSeq(s string) (seqParts, bool) {
	if len(s) != seqLen || s[0] != '4' || s[1] != '9' {
		return seqParts{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return seqParts{}, false
		}
	}
	c, err1 := strconv.ParseUint(s[2:22], 10, 64)
	st, err2 := strconv.Atoi(s[22:28])
	sh, err3 := strconv.Atoi(s[28:40])
	if err1 != nil || err2 != nil || err3 != nil {
		return seqParts{}, false
	}
	return seqParts{c, st, sh}, true
}

// validSeqSyntax reports whether s satisfies the API's pattern for sequence
// numbers: 0|([1-9]\d{0,128}).
func validSeqSyntax(s string) bool {
	if s == "" || len(s) > 129 {
		return false
	}
	if s == "0" {
		return true
	}
	if s[0] < '1' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
