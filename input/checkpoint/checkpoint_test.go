package checkpoint

import (
	"strings"
	"testing"
	"time"
)

// TestParseTimeKeepsToKinesisTimes: a start time a user gives lies between
// 2013 and a few minutes from now, whether written as a time or as a
// duration back from now. Before, 2999-01-01 was taken (and sent by the
// AWS SDK as a negative number, which Kinesis took for the trim horizon:
// every record read again), and -200000h meant 2004.
func TestParseTimeKeepsToKinesisTimes(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]string{
		"2024-05-01T00:00:00Z": "",
		"-24h":                 "",
		"2026-12-04T12:04:00Z": "", // a clock a few minutes apart
		"2999-01-01T00:00:00Z": "expected a time between 2013-01-01T00:00:00Z (no Kinesis record is older) and a few minutes from now (2026-12-04T12:05:00Z)",
		"2026-12-05T12:00:00Z": "and a few minutes from now",
		"1900-01-01T00:00:00Z": "expected a time between 2013-01-01T00:00:00Z",
		"-200000h":             "means 2004-02-",
		"tomorrow":             "neither an RFC 3339 time nor a duration back from now",
	} {
		_, err := ParseTime(in, now)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("ParseTime(%q): %v, want %q", in, err, want)
		}
	}
}

// TestStoredStartTimeMayRunAheadByLessThanADay: a stored start time was
// given by a user or pinned by a clock that may run ahead of this one: up
// to a day ahead it is read, after that (the year 2999 of a hand edit) it
// is broken.
func TestStoredStartTimeMayRunAheadByLessThanADay(t *testing.T) {
	for ahead, ok := range map[time.Duration]bool{time.Hour: true, 23 * time.Hour: true, 25 * time.Hour: false, 100000 * time.Hour: false} {
		ts := time.Now().Add(ahead)
		c := Checkpoint{Start: Start{Kind: "AT_TIMESTAMP", Timestamp: &ts}}
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("a stored start %v ahead: %v, want ok %v", ahead, err, ok)
		}
	}
}
