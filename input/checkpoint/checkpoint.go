// Package checkpoint holds what the input remembers about each shard between
// runs, and the stores that keep it.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// Position is a place in a shard: the record with Sequence and, for a KPL
// aggregated record, the user record with index SubSequence inside it.
type Position struct {
	Sequence    string `json:"sequence_number"`
	SubSequence int64  `json:"sub_sequence_number,omitempty"`
	// Partial is set when the position sits inside an aggregated record: user
	// records after SubSequence in the same Kinesis record are still to come.
	Partial bool `json:"partial,omitempty"`
}

// Detached returns p with a sequence number of its own: the sequence
// numbers of one read share one string, which a position kept past the
// read (a batch's end, a checkpoint) would otherwise keep whole.
func (p Position) Detached() Position {
	p.Sequence = strings.Clone(p.Sequence)
	return p
}

// Resume returns where to read from so that the next record delivered is the
// first one after p. Inside an aggregate that is the aggregate itself (its
// first SubSequence+1 user records must then be skipped).
func (p Position) Resume() shard.Start {
	if p.Partial {
		return shard.Start{Kind: shard.AtSequence, Sequence: p.Sequence}
	}
	return shard.Start{Kind: shard.AfterSequence, Sequence: p.Sequence}
}

// Less orders positions within one shard.
func (p Position) Less(q Position) bool {
	if c := shard.CompareSequence(p.Sequence, q.Sequence); c != 0 {
		return c < 0
	}
	if p.SubSequence != q.SubSequence {
		return p.SubSequence < q.SubSequence
	}
	return p.Partial && !q.Partial
}

func (p Position) String() string {
	if p.Partial || p.SubSequence > 0 {
		return fmt.Sprintf("%s/%d", p.Sequence, p.SubSequence)
	}
	return p.Sequence
}

// Start is where a shard is first read when nothing of it has been acknowledged
// yet. It is decided once, when the shard is first seen, and stored, so that a
// restart before the first acknowledgement starts at the same place (start_from
// latest is stored as the timestamp it meant then).
type Start struct {
	Kind      string     `json:"kind"` // a shard.StartKind name: TRIM_HORIZON or AT_TIMESTAMP
	Timestamp *time.Time `json:"timestamp,omitempty"`
}

// ToShard converts s for a publisher.
func (s Start) ToShard() (shard.Start, error) {
	switch s.Kind {
	case shard.TrimHorizon.String():
		return shard.Start{Kind: shard.TrimHorizon}, nil
	case shard.AtTimestamp.String():
		if s.Timestamp == nil {
			return shard.Start{}, fmt.Errorf("stored start %s has no timestamp", s.Kind)
		}
		return shard.Start{Kind: shard.AtTimestamp, Timestamp: *s.Timestamp}, nil
	case shard.Latest.String():
		return shard.Start{Kind: shard.Latest}, nil
	}
	return shard.Start{}, fmt.Errorf("stored start %q is not one of TRIM_HORIZON, AT_TIMESTAMP, LATEST", s.Kind)
}

// FromShard converts a publisher start kind that can be stored as a Start.
func FromShard(s shard.Start) Start {
	out := Start{Kind: s.Kind.String()}
	if s.Kind == shard.AtTimestamp {
		t := s.Timestamp.UTC()
		out.Timestamp = &t
	}
	return out
}

// ParseTime reads a start time as users give it: an RFC 3339 time, or a
// duration back from now (-24h). It must lie between 2013 and a few
// minutes from now (CheckStartTime).
func ParseTime(s string, now time.Time) (time.Time, error) {
	var t time.Time
	means := ""
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return time.Time{}, errors.New("not a duration back from now; expected e.g. -24h or -90m")
		}
		t = now.Add(d)
		means = "means " + t.UTC().Format(time.RFC3339) + "; "
	} else {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return time.Time{}, errors.New("neither an RFC 3339 time nor a duration back from now; expected e.g. 2024-05-01T00:00:00Z or -24h")
		}
	}
	if err := CheckStartTime("", t, now); err != nil {
		var fe *FieldError
		errors.As(err, &fe)
		return time.Time{}, fmt.Errorf("%sexpected %s", means, fe.Expected)
	}
	return t, nil
}

// Checkpoint is what is stored for one shard.
type Checkpoint struct {
	// Start is where reading begins while Position is nil.
	Start Start `json:"start"`
	// Position is the last acknowledged record: everything up to and
	// including it has been acknowledged. Nil until the first acknowledgement.
	Position *Position `json:"position,omitempty"`
	// Ended is set once the shard is closed and every record of it has been
	// acknowledged: its children may then be read.
	Ended bool `json:"ended,omitempty"`
	// ShardStart is the shard's starting sequence number: a shard id of a
	// stream deleted and created again starts elsewhere.
	ShardStart string `json:"shard_starting_sequence_number,omitempty"`
	// Broken, when set, says why the stored checkpoint cannot be read
	// from (naming the store, the shard, the value and the fix): the shard
	// is not read until the checkpoint is set again. It is never stored:
	// the stored values stay as they were found, for the operator to see.
	Broken error `json:"-"`
}

// Resume returns where a reader of the shard starts: an error for a
// broken checkpoint or one whose values cannot be read from.
func (c Checkpoint) Resume() (shard.Start, error) {
	if c.Broken != nil {
		return shard.Start{}, c.Broken
	}
	if err := c.Validate(); err != nil {
		return shard.Start{}, err
	}
	if c.Position != nil {
		return c.Position.Resume(), nil
	}
	return c.Start.ToShard()
}

// Stream is the stored state of one stream.
type Stream struct {
	// ARN of the stream.
	ARN string `json:"stream_arn"`
	// Created is the stream's creation time: a stream deleted and created
	// again under the same name has new shards that the old checkpoints do
	// not describe.
	Created time.Time `json:"stream_created"`
	// Shards maps shard ids to their checkpoints.
	Shards map[string]Checkpoint `json:"shards"`
}

// Store keeps checkpoints durably.
type Store interface {
	// Load returns the stored state of a stream; a stream never saved comes
	// back with no shards and a zero Created.
	Load(ctx context.Context, streamARN string) (Stream, error)
	// Save durably replaces the stored state of a stream with s. When Save
	// returns nil the state survives a crash of the process or the machine.
	Save(ctx context.Context, s Stream) error
	// Close releases the store.
	Close() error
}
