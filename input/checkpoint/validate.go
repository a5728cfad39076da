package checkpoint

import (
	"fmt"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// earliestStart is the earliest start time a stored position may hold:
// Kinesis holds no record older than its launch (November 2013), so a time
// before 2013 (year 1 is the zero time) is a mangled value, not a place.
var earliestStart = time.Date(2013, 1, 1, 0, 0, 0, 0, time.UTC)

// FieldError is a stored value that cannot be a position: which field, the
// value as stored, and what was expected.
type FieldError struct {
	Field    string // as the store names it
	Value    string // as stored, quoted where it is a string
	Expected string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s is %s, expected %s", e.Field, e.Value, e.Expected)
}

// CheckSequence reports a sequence number the Kinesis API would refuse:
// anything but 1 to 129 decimal digits without a leading zero ("0" aside).
func CheckSequence(field, seq string) error {
	if !shard.ValidSequence(seq) {
		value := fmt.Sprintf("%q", seq)
		if len(seq) > 40 {
			value = fmt.Sprintf("%q... (%d characters)", seq[:40], len(seq))
		}
		return &FieldError{Field: field, Value: value, Expected: fmt.Sprintf("a sequence number (1 to %d decimal digits, no leading zero)", shard.MaxSequenceDigits)}
	}
	return nil
}

// MaxStartAhead is how far past now a start time a user gives may lie: a
// few minutes, for clocks that differ. A time further ahead is a typo (a
// time after 2262 is even sent by the AWS SDK as a negative number, which
// Kinesis takes for the trim horizon: every record read again).
const MaxStartAhead = 5 * time.Minute

// maxStoredAhead is how far past now a stored start time may lie: it was
// given by a user (MaxStartAhead) or pinned by a clock, on a machine whose
// clock may run ahead of this one's, but never by a day.
const maxStoredAhead = 24 * time.Hour

// CheckStartTime reports a start time a user gives (start_timestamp, the
// checkpoint command) that cannot be meant: before Kinesis existed, or
// later than MaxStartAhead from now.
func CheckStartTime(field string, t, now time.Time) error {
	return checkStart(field, t, now.Add(MaxStartAhead), "a few minutes from now")
}

// CheckStoredStartTime reports a stored start time that cannot be meant:
// before Kinesis existed, or a day or more from now.
func CheckStoredStartTime(field string, t time.Time) error {
	return checkStart(field, t, time.Now().Add(maxStoredAhead), "a day from now")
}

func checkStart(field string, t, latest time.Time, ahead string) error {
	if t.Before(earliestStart) || t.After(latest) {
		return &FieldError{Field: field, Value: t.UTC().Format(time.RFC3339Nano),
			Expected: fmt.Sprintf("a time between %s (no Kinesis record is older) and %s (%s)", earliestStart.Format(time.RFC3339), ahead, latest.UTC().Format(time.RFC3339))}
	}
	return nil
}

// Validate reports the first stored value of c that cannot be read from:
// a malformed sequence number, a negative sub-sequence, an unknown start
// kind, a start time missing or before Kinesis existed. The field names
// are those of the checkpoint file; the lease table decodes its own
// attributes before this.
func (c Checkpoint) Validate() error {
	if c.ShardStart != "" {
		if err := CheckSequence("shard_starting_sequence_number", c.ShardStart); err != nil {
			return err
		}
	}
	if p := c.Position; p != nil {
		if err := CheckSequence("position.sequence_number", p.Sequence); err != nil {
			return err
		}
		if p.SubSequence < 0 {
			return &FieldError{Field: "position.sub_sequence_number", Value: fmt.Sprint(p.SubSequence), Expected: "a number of 0 or more"}
		}
	}
	if c.Ended {
		return nil
	}
	switch c.Start.Kind {
	case shard.TrimHorizon.String(), shard.Latest.String():
	case shard.AtTimestamp.String():
		if c.Start.Timestamp == nil {
			return &FieldError{Field: "start.timestamp", Value: "missing", Expected: "the time AT_TIMESTAMP starts at"}
		}
		if err := CheckStoredStartTime("start.timestamp", *c.Start.Timestamp); err != nil {
			return err
		}
	default:
		if c.Position == nil {
			return &FieldError{Field: "start.kind", Value: fmt.Sprintf("%q", c.Start.Kind), Expected: "one of TRIM_HORIZON, AT_TIMESTAMP, LATEST"}
		}
	}
	return nil
}
