// Package shard holds the small vocabulary that the record publishers (efo and
// polling) and the input share: where to start reading a shard, what a
// publisher hands back, and how Kinesis sequence numbers compare.
package shard

import (
	"fmt"
	"time"
)

// StartKind says how a shard reader positions itself at the beginning of a
// read. The values mirror the Kinesis ShardIteratorType and the SubscribeToShard
// StartingPosition type.
type StartKind uint8

const (
	// TrimHorizon starts at the oldest record still retained.
	TrimHorizon StartKind = iota
	// Latest starts just after the newest record. The input never asks for it
	// directly (it pins "latest" to a timestamp so that a restart loses nothing),
	// but the publishers support it.
	Latest
	// AtTimestamp starts at the first record whose approximate arrival time is
	// at or after Start.Timestamp.
	AtTimestamp
	// AtSequence starts at the record with Start.Sequence. The input uses it to
	// resume inside a KPL aggregated record.
	AtSequence
	// AfterSequence starts just after the record with Start.Sequence.
	AfterSequence
)

// String returns the Kinesis name of the kind, e.g. AFTER_SEQUENCE_NUMBER.
func (k StartKind) String() string {
	switch k {
	case TrimHorizon:
		return "TRIM_HORIZON"
	case Latest:
		return "LATEST"
	case AtTimestamp:
		return "AT_TIMESTAMP"
	case AtSequence:
		return "AT_SEQUENCE_NUMBER"
	case AfterSequence:
		return "AFTER_SEQUENCE_NUMBER"
	}
	return fmt.Sprintf("StartKind(%d)", uint8(k))
}

// Start is a starting position in one shard. Sequence is set for AtSequence
// and AfterSequence, Timestamp for AtTimestamp.
type Start struct {
	Kind      StartKind
	Sequence  string
	Timestamp time.Time
}

// String renders the position for logs and errors.
func (s Start) String() string {
	switch s.Kind {
	case AtSequence, AfterSequence:
		return s.Kind.String() + " " + s.Sequence
	case AtTimestamp:
		return s.Kind.String() + " " + s.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return s.Kind.String()
}

// Validate reports a Start that a publisher could not use.
func (s Start) Validate() error {
	switch s.Kind {
	case TrimHorizon, Latest:
		return nil
	case AtTimestamp:
		if s.Timestamp.IsZero() {
			return fmt.Errorf("start position %v needs a timestamp", s.Kind)
		}
		return nil
	case AtSequence, AfterSequence:
		if !ValidSequence(s.Sequence) {
			return fmt.Errorf("start position %v needs a sequence number of 1 to %d decimal digits without a leading zero, got %q", s.Kind, MaxSequenceDigits, s.Sequence)
		}
		return nil
	}
	return fmt.Errorf("unknown start position kind %d", uint8(s.Kind))
}
