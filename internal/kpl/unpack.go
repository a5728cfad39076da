package kpl

import (
	"bytes"
	"crypto/md5"
	"slices"
	"strings"
)

// magic begins the data of every aggregated record.
var magic = [4]byte{0xF3, 0x89, 0x9A, 0xC2}

// Sizes of the framing around the protocol buffer message.
const (
	magicLen  = len(magic)
	digestLen = md5.Size
	// Overhead is the size of an aggregate's framing: the magic bytes before
	// the protocol buffer message and the MD5 digest after it.
	Overhead = magicLen + digestLen
)

// Field numbers of the KPL messages.
const (
	aggPartitionKeyTable    = 1
	aggExplicitHashKeyTable = 2
	aggRecords              = 3

	recPartitionKeyIndex    = 1
	recExplicitHashKeyIndex = 2
	recData                 = 3
	recTags                 = 4

	tagKey   = 1
	tagValue = 2
)

// UserRecord is one record a producer wrote, as carried inside an aggregate.
type UserRecord struct {
	// PartitionKey is the record's partition key. It may be empty if the
	// producer wrote an empty one; Kinesis itself would not accept that for a
	// plain record.
	PartitionKey string
	// ExplicitHashKey is the record's explicit hash key in decimal, or empty
	// when it has none. When set it overrides the partition key's hash for
	// shard assignment (see HashKey).
	ExplicitHashKey string
	// Data is the record's payload. Records from Unpack alias the input: they
	// stay valid only while the caller leaves that input unmodified. Its
	// capacity ends with the payload, so appending to it reallocates rather
	// than overwrite the aggregate.
	Data []byte
	// SubSequence is the record's index within its aggregate, starting at 0:
	// the sub-sequence number that, with the carrier record's sequence number,
	// gives the record's position in the shard. Pack and Builder ignore it.
	SubSequence uint64
}

// IsAggregated reports whether data is a KPL aggregate by its framing alone:
// it begins with the magic bytes and is long enough to end with a digest. It
// does not check the digest or the contents; Unpack does.
func IsAggregated(data []byte) bool {
	return len(data) >= Overhead && [magicLen]byte(data[:magicLen]) == magic
}

// Unpacker splits aggregated records into user records. It keeps scratch space
// between calls so that opening an aggregate costs one allocation for all of
// its keys (and more only when its index must grow). The zero value is ready
// to use. An Unpacker is not safe for concurrent use; give each shard reader
// its own.
type Unpacker struct {
	// The key tables of the aggregate being opened, as spans first of the
	// message and then of the string holding every key, and the index of its
	// user records. They hold no pointers, so an idle Unpacker keeps no
	// aggregate alive.
	pks, ehks []span
	records   []entry
}

// span is a byte range, [start, end), of the message or of the key string.
type span struct{ start, end int }

// entry is one user record of an aggregate being opened: first the span of
// its Record message, then, once that is checked, the span of its data and
// its key indices. Sixteen bytes, whatever the record holds: an aggregate of
// many small user records costs its index, not its user records decoded.
type entry struct {
	start, end uint32
	pk         uint32
	ehk        uint32 // the explicit hash key's index plus one; 0: none
}

// maxMessage is the largest AggregatedRecord message an entry can index.
const maxMessage = 1<<32 - 1

// Unpacked is an aggregated record that Open checked whole, whose user
// records are decoded one at a time by Record: a reader hands out an
// aggregate of many user records a part at a time, holding the user records
// of one part, not all of them. It aliases the data given to Open and the
// Unpacker's scratch space, and is valid until that Unpacker's next Open or
// Unpack. The zero value holds no user records.
type Unpacked struct {
	msg       []byte
	keys      string
	pks, ehks []span
	records   []entry
}

// Len is the number of user records of the aggregate.
func (a *Unpacked) Len() int { return len(a.records) }

// Record returns the user record of index i (its sub-sequence number), 0 <=
// i < Len. Its Data aliases the aggregate's data, as Unpack's do.
func (a *Unpacked) Record(i int) UserRecord {
	e := a.records[i]
	r := UserRecord{Data: a.msg[e.start:e.end:e.end], SubSequence: uint64(i)}
	k := a.pks[e.pk]
	r.PartitionKey = a.keys[k.start:k.end]
	if e.ehk > 0 {
		k := a.ehks[e.ehk-1]
		r.ExplicitHashKey = a.keys[k.start:k.end]
	}
	return r
}

// appendTo appends every user record to dst.
func (a *Unpacked) appendTo(dst []UserRecord) []UserRecord {
	dst = slices.Grow(dst, a.Len())
	for i := range a.Len() {
		dst = append(dst, a.Record(i))
	}
	return dst
}

// Unpack is (*Unpacker).Unpack with a fresh Unpacker, for occasional use.
func Unpack(dst []UserRecord, data []byte) (records []UserRecord, aggregated bool, err error) {
	var u Unpacker
	return u.Unpack(dst, data)
}

// Unpack appends the user records of the aggregated record data to dst, in
// order, and returns the extended slice with aggregated set. It is Open
// followed by Record of every user record; a reader of aggregates that may
// hold many user records should use those instead, and convert a part at a
// time.
//
// Plain data (see IsAggregated) is not an error: Unpack returns dst unchanged
// with aggregated false, and the caller delivers the Kinesis record as it is.
// A corrupt aggregate returns dst unchanged, aggregated true and a
// *CorruptError (see Open). An aggregate with no user records appends nothing
// and returns aggregated true and a nil error.
//
// Each record's Data aliases data; its partition and explicit hash keys are
// copied, all of one aggregate's into a single allocation.
func (u *Unpacker) Unpack(dst []UserRecord, data []byte) (records []UserRecord, aggregated bool, err error) {
	a, aggregated, err := u.Open(data)
	if err != nil || !aggregated {
		return dst, aggregated, err
	}
	return a.appendTo(dst), true, nil
}

// Open checks the aggregated record data whole and indexes its user records,
// which the returned Unpacked then decodes one at a time.
//
// Plain data (see IsAggregated) is not an error: Open returns aggregated false,
// and the caller delivers the Kinesis record as it is.
//
// Every check is made before anything is returned: the MD5 digest, the
// protocol buffer structure, the presence of the required fields, every key
// index against its table, and every entry of the explicit hash key table (a
// decimal integer below 2^128). If any check fails, Open returns aggregated
// true and a *CorruptError: a corrupt aggregate is rejected whole, never
// delivered in part. Fields this package does not know are skipped, as
// protocol buffers require, except groups (a deprecated wire type the KPL
// never writes), which are corrupt. Tags are checked for structure and
// dropped. When a field that holds one value appears more than once, the last
// occurrence wins, as in any protocol buffer decoder.
//
// An aggregate with no user records (a valid message with an empty records
// list, which the KPL never writes) is not corrupt: its Len is 0. The Kinesis
// record then carries nothing to deliver, and its position counts as read.
//
// The index costs 16 bytes per user record, kept by the Unpacker for its next
// aggregates; the keys are copied, all of the aggregate's into one string.
func (u *Unpacker) Open(data []byte) (a Unpacked, aggregated bool, err error) {
	if !IsAggregated(data) {
		return Unpacked{}, false, nil
	}
	msg := data[magicLen : len(data)-digestLen]
	if sum := md5.Sum(msg); !bytes.Equal(sum[:], data[len(data)-digestLen:]) {
		return Unpacked{}, true, corrupt("md5 mismatch")
	}
	a, cerr := u.index(msg)
	if cerr != nil {
		return Unpacked{}, true, cerr
	}
	return a, true, nil
}

// decode appends the user records of the AggregatedRecord message msg to dst,
// or returns dst unchanged and the reason msg is corrupt: Unpack after the
// digest check.
func (u *Unpacker) decode(dst []UserRecord, msg []byte) ([]UserRecord, *CorruptError) {
	a, err := u.index(msg)
	if err != nil {
		return dst, err
	}
	return a.appendTo(dst), nil
}

// index checks the AggregatedRecord message msg and indexes its user
// records, or returns the reason msg is corrupt.
func (u *Unpacker) index(msg []byte) (Unpacked, *CorruptError) {
	if len(msg) > maxMessage {
		return Unpacked{}, corruptf("message of %d bytes, larger than the %d an aggregate can index", len(msg), maxMessage)
	}
	keys, err := u.readTop(msg)
	if err != nil {
		return Unpacked{}, err
	}
	for i := range u.records {
		e := &u.records[i]
		if err := u.record(e, msg[e.start:e.end:e.end], i); err != nil {
			return Unpacked{}, err
		}
	}
	return Unpacked{msg: msg, keys: keys, pks: u.pks, ehks: u.ehks, records: u.records}, nil
}

// readTop walks the top level of the message: it checks the framing of every
// field, locates the records in u.records, and returns both key tables copied
// into one string, with u.pks and u.ehks locating each entry in it.
func (u *Unpacker) readTop(msg []byte) (keys string, err *CorruptError) {
	u.pks, u.ehks, u.records = u.pks[:0], u.ehks[:0], u.records[:0]
	total := 0
	for rest := msg; len(rest) > 0; {
		f, next, reason := nextField(rest)
		if reason != "" {
			return "", corrupt(reason)
		}
		at := len(msg) - len(next) - len(f.body) // where a length-delimited body starts
		rest = next
		switch f.num {
		case aggPartitionKeyTable:
			if f.typ != wireBytes {
				return "", wrongType(-1, "partition_key_table", f.typ, wireBytes)
			}
			u.pks = append(u.pks, span{at, at + len(f.body)})
			total += len(f.body)
		case aggExplicitHashKeyTable:
			if f.typ != wireBytes {
				return "", wrongType(-1, "explicit_hash_key_table", f.typ, wireBytes)
			}
			if _, ok := parseHashKey(f.body); !ok {
				return "", corruptf("explicit hash key table entry %d (%q) is not a decimal integer below 2^128",
					len(u.ehks), clip(f.body))
			}
			u.ehks = append(u.ehks, span{at, at + len(f.body)})
			total += len(f.body)
		case aggRecords:
			if f.typ != wireBytes {
				return "", wrongType(-1, "records", f.typ, wireBytes)
			}
			u.records = append(u.records, entry{start: uint32(at), end: uint32(at + len(f.body))})
		}
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, table := range [2][]span{u.pks, u.ehks} {
		for i, k := range table {
			start := sb.Len()
			sb.Write(msg[k.start:k.end])
			table[i] = span{start, sb.Len()}
		}
	}
	return sb.String(), nil
}

// record checks body, the index-th Record message, and turns e, its entry,
// from the span of body into the span of its data and its key indices.
func (u *Unpacker) record(e *entry, body []byte, index int) *CorruptError {
	var (
		pkIndex, ehkIndex  uint64
		hasPK, hasEHK      bool
		dataStart, dataEnd uint32 // in the message
		hasData            bool
	)
	for rest := body; len(rest) > 0; {
		f, next, reason := nextField(rest)
		if reason != "" {
			return corruptf("record %d: %s", index, reason)
		}
		rest = next
		switch f.num {
		case recPartitionKeyIndex:
			if f.typ != wireVarint {
				return wrongType(index, "partition_key_index", f.typ, wireVarint)
			}
			pkIndex, hasPK = f.val, true
		case recExplicitHashKeyIndex:
			if f.typ != wireVarint {
				return wrongType(index, "explicit_hash_key_index", f.typ, wireVarint)
			}
			ehkIndex, hasEHK = f.val, true
		case recData:
			if f.typ != wireBytes {
				return wrongType(index, "data", f.typ, wireBytes)
			}
			dataStart = e.start + uint32(len(body)-len(next)-len(f.body))
			dataEnd, hasData = dataStart+uint32(len(f.body)), true
		case recTags:
			if f.typ != wireBytes {
				return wrongType(index, "tags", f.typ, wireBytes)
			}
			if reason := checkTag(f.body); reason != "" {
				return corruptf("record %d: tag: %s", index, reason)
			}
		}
	}
	npk := uint64(len(u.pks))
	switch {
	case !hasPK:
		return corruptf("record %d: missing required field partition_key_index", index)
	case !hasData:
		return corruptf("record %d: missing required field data", index)
	case pkIndex >= npk:
		return corruptf("record %d: partition key index %d out of range (table has %d)", index, pkIndex, npk)
	}
	var ehk uint32
	if hasEHK {
		if n := uint64(len(u.ehks)); ehkIndex >= n {
			return corruptf("record %d: explicit hash key index %d out of range (table has %d)", index, ehkIndex, n)
		}
		ehk = uint32(ehkIndex) + 1
	}
	// The indices are below their tables' lengths, and so below maxMessage.
	*e = entry{start: dataStart, end: dataEnd, pk: uint32(pkIndex), ehk: ehk}
	return nil
}

// checkTag validates the body of a Tag message. Tags carry nothing a reader
// of this package needs, but a malformed one means a corrupt aggregate.
func checkTag(body []byte) string {
	hasKey := false
	for len(body) > 0 {
		f, next, reason := nextField(body)
		if reason != "" {
			return reason
		}
		body = next
		if (f.num == tagKey || f.num == tagValue) && f.typ != wireBytes {
			return "wrong wire type for a tag key or value"
		}
		hasKey = hasKey || f.num == tagKey
	}
	if !hasKey {
		return "missing required field key"
	}
	return ""
}

// wrongType reports a known field with an unexpected wire type, inside the
// index-th record or, with index -1, at the top level of the aggregate.
func wrongType(index int, name string, got, want uint8) *CorruptError {
	if index < 0 {
		return corruptf("field %s has wire type %d, want %d", name, got, want)
	}
	return corruptf("record %d: field %s has wire type %d, want %d", index, name, got, want)
}
