package kpl

import (
	"crypto/md5"
	"fmt"
)

// MaxRecordSize is the largest record of a stream by default: its data
// plus its partition key may not exceed 1 MiB. Since October 2025 a stream
// may take records of up to MaxStreamRecordSize (its MaxRecordSizeInKiB):
// a Builder for such a stream sets MaxSize.
const MaxRecordSize = 1 << 20

// MaxStreamRecordSize is the largest record any stream takes (10 MiB).
const MaxStreamRecordSize = 10 << 20

// Aggregate is a packed aggregated record, ready to be put to Kinesis as one
// record.
type Aggregate struct {
	// PartitionKey and ExplicitHashKey are the keys the carrier Kinesis record
	// should be put with: the first user record's, as the KPL does, so that
	// the aggregate lands on the shard of its first user record.
	// ExplicitHashKey is empty when the first user record has none.
	PartitionKey    string
	ExplicitHashKey string
	// Data is the magic bytes, the protocol buffer message and its digest.
	Data []byte
}

// Pack aggregates records, in order, into one Aggregate. The partition key
// table holds each distinct key once, as does the explicit hash key table.
// SubSequence fields are ignored: a record's sub-sequence number is its index.
//
// Pack fails with ErrNoRecords when records is empty, with an error wrapping
// ErrInvalidHashKey when an explicit hash key is set but invalid, and with an
// error wrapping ErrTooLarge when the aggregate would exceed MaxRecordSize
// (see Builder.Size).
func Pack(records []UserRecord) (Aggregate, error) {
	var b Builder
	for i := range records {
		if err := b.Add(records[i]); err != nil {
			return Aggregate{}, fmt.Errorf("user record %d: %w", i, err)
		}
	}
	return b.Build()
}

// Builder accumulates user records into one aggregate while tracking its
// exact encoded size, so that a producer can close an aggregate just before it
// would exceed the Kinesis record limit. The zero value is an empty builder
// with a limit of MaxRecordSize. A Builder is not safe for concurrent use.
//
// A Builder keeps the Data slices of added records, without copying them,
// until Build: the caller must not modify them in between.
type Builder struct {
	// MaxSize caps Size. Zero means MaxRecordSize; a negative value means
	// no limit. Set it before the first Add.
	MaxSize int

	pkIndex, ehkIndex map[string]uint64
	pks, ehks         []string
	records           []packed
	msgLen            int // encoded size of the protocol buffer message
}

// packed is a user record with its keys replaced by table indexes.
type packed struct {
	pk, ehk uint64
	hasEHK  bool
	data    []byte
}

// Len is the number of user records added since the last Reset.
func (b *Builder) Len() int { return len(b.records) }

// Size is what the aggregate built now would count against the Kinesis
// record limit: the length of Aggregate.Data plus that of its partition key.
// An empty builder has size 0.
func (b *Builder) Size() int {
	if len(b.records) == 0 {
		return 0
	}
	return Overhead + b.msgLen + len(b.pks[b.records[0].pk])
}

// Add appends r to the aggregate, unless it would make Size exceed the limit:
// then it returns an error wrapping ErrTooLarge and leaves the builder as it
// was, and the caller builds what it holds and adds r to a fresh aggregate.
// That error from an empty builder means r alone is too large for any
// aggregate. An explicit
// hash key that is set but not valid fails with an error wrapping
// ErrInvalidHashKey.
func (b *Builder) Add(r UserRecord) error {
	if r.ExplicitHashKey != "" {
		if _, err := ParseHashKey(r.ExplicitHashKey); err != nil {
			return err
		}
	}
	p := packed{data: r.Data}
	grow := 0
	pk, seen := b.pkIndex[r.PartitionKey]
	newPK := !seen
	if newPK {
		pk = uint64(len(b.pks))
		grow += bytesFieldLen(len(r.PartitionKey))
	}
	p.pk = pk
	newEHK := false
	if r.ExplicitHashKey != "" {
		ehk, seen := b.ehkIndex[r.ExplicitHashKey]
		if !seen {
			ehk, newEHK = uint64(len(b.ehks)), true
			grow += bytesFieldLen(len(r.ExplicitHashKey))
		}
		p.ehk, p.hasEHK = ehk, true
	}
	grow += bytesFieldLen(p.size())

	size := Overhead + b.msgLen + grow
	if len(b.records) == 0 {
		size += len(r.PartitionKey)
	} else {
		size += len(b.pks[b.records[0].pk])
	}
	if limit := b.limit(); limit >= 0 && size > limit {
		return fmt.Errorf("%w: %d bytes with this record, limit %d", ErrTooLarge, size, limit)
	}

	if newPK {
		if b.pkIndex == nil {
			b.pkIndex = make(map[string]uint64)
		}
		b.pkIndex[r.PartitionKey] = pk
		b.pks = append(b.pks, r.PartitionKey)
	}
	if newEHK {
		if b.ehkIndex == nil {
			b.ehkIndex = make(map[string]uint64)
		}
		b.ehkIndex[r.ExplicitHashKey] = p.ehk
		b.ehks = append(b.ehks, r.ExplicitHashKey)
	}
	b.records = append(b.records, p)
	b.msgLen += grow
	return nil
}

// Build encodes the records added since the last Reset into a new Aggregate.
// It fails with ErrNoRecords on an empty builder. The builder is left as it
// was; call Reset to start the next aggregate.
func (b *Builder) Build() (Aggregate, error) {
	if len(b.records) == 0 {
		return Aggregate{}, ErrNoRecords
	}
	out := make([]byte, magicLen, Overhead+b.msgLen)
	copy(out, magic[:])
	for _, k := range b.pks {
		out = appendTag(out, aggPartitionKeyTable, wireBytes)
		out = appendVarint(out, uint64(len(k)))
		out = append(out, k...)
	}
	for _, k := range b.ehks {
		out = appendTag(out, aggExplicitHashKeyTable, wireBytes)
		out = appendVarint(out, uint64(len(k)))
		out = append(out, k...)
	}
	for _, p := range b.records {
		out = appendTag(out, aggRecords, wireBytes)
		out = appendVarint(out, uint64(p.size()))
		out = appendTag(out, recPartitionKeyIndex, wireVarint)
		out = appendVarint(out, p.pk)
		if p.hasEHK {
			out = appendTag(out, recExplicitHashKeyIndex, wireVarint)
			out = appendVarint(out, p.ehk)
		}
		out = appendTag(out, recData, wireBytes)
		out = appendVarint(out, uint64(len(p.data)))
		out = append(out, p.data...)
	}
	sum := md5.Sum(out[magicLen:])
	out = append(out, sum[:]...)

	first := b.records[0]
	a := Aggregate{PartitionKey: b.pks[first.pk], Data: out}
	if first.hasEHK {
		a.ExplicitHashKey = b.ehks[first.ehk]
	}
	return a, nil
}

// Reset empties the builder, keeping its MaxSize and its allocated space, and
// drops its references to the records' data.
func (b *Builder) Reset() {
	clear(b.pkIndex)
	clear(b.ehkIndex)
	clear(b.records)
	clear(b.pks)
	clear(b.ehks)
	b.pks, b.ehks, b.records = b.pks[:0], b.ehks[:0], b.records[:0]
	b.msgLen = 0
}

func (b *Builder) limit() int {
	if b.MaxSize == 0 {
		return MaxRecordSize
	}
	return b.MaxSize
}

// size is the encoded size of p's Record message.
func (p *packed) size() int {
	n := 1 + varintLen(p.pk) + bytesFieldLen(len(p.data))
	if p.hasEHK {
		n += 1 + varintLen(p.ehk)
	}
	return n
}
