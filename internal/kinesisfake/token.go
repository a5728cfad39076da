package kinesisfake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// Shard iterators and pagination tokens are opaque to clients: a kind byte,
// numbers, an optional string and the issue time, signed with a per-server key
// so that a forged or garbled token is refused rather than misread.

const (
	tokenIterator      = 'I'
	tokenListShards    = 'S'
	tokenListStreams   = 'T'
	tokenListConsumers = 'C'

	macLen = 16

	nextTokenLifetime = 5 * time.Minute // ListShards/ListStreamConsumers tokens, as AWS
)

type token struct {
	issued time.Time
	nums   []uint64
	str    string
}

func (s *Server) seal(kind byte, t token) string {
	b := make([]byte, 0, 64+len(t.str))
	b = append(b, kind, byte(len(t.nums)))
	b = binary.AppendVarint(b, t.issued.UnixNano())
	for _, n := range t.nums {
		b = binary.AppendUvarint(b, n)
	}
	b = append(b, t.str...)
	m := hmac.New(sha256.New, s.key)
	m.Write(b)
	b = m.Sum(b)[:len(b)+macLen]
	return base64.StdEncoding.EncodeToString(b)
}

func (s *Server) open(kind byte, str string) (token, bool) {
	b, err := base64.StdEncoding.DecodeString(str)
	if err != nil || len(b) < 2+macLen {
		return token{}, false
	}
	body, mac := b[:len(b)-macLen], b[len(b)-macLen:]
	m := hmac.New(sha256.New, s.key)
	m.Write(body)
	if !hmac.Equal(m.Sum(nil)[:macLen], mac) || body[0] != kind {
		return token{}, false
	}
	n := int(body[1])
	rest := body[2:]
	issued, k := binary.Varint(rest)
	if k <= 0 {
		return token{}, false
	}
	rest = rest[k:]
	t := token{issued: time.Unix(0, issued), nums: make([]uint64, n)}
	for i := range n {
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			return token{}, false
		}
		t.nums[i] = v
		rest = rest[k:]
	}
	t.str = string(rest)
	return t, true
}

// iterator is a decoded shard iterator: the next record to read is
// records[pos] of the shard.
type iterator struct {
	streamSerial int
	shardIndex   int
	pos          int
	issued       time.Time
}

func (s *Server) sealIterator(it iterator) string {
	return s.seal(tokenIterator, token{
		issued: it.issued,
		nums:   []uint64{uint64(it.streamSerial), uint64(it.shardIndex), uint64(it.pos)},
	})
}

func (s *Server) openIterator(str string) (iterator, bool) {
	t, ok := s.open(tokenIterator, str)
	if !ok || len(t.nums) != 3 {
		return iterator{}, false
	}
	return iterator{
		streamSerial: int(t.nums[0]),
		shardIndex:   int(t.nums[1]),
		pos:          int(t.nums[2]),
		issued:       t.issued,
	}, true
}
