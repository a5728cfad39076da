package read

import (
	"context"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/internal/membudget"
)

// TestRoomOfAReadComesBackWithItsLastMessage: a read's messages share its
// buffers, so its room comes back whole once all of them are resolved, in
// the order reads were converted; a reader that stops gives back at once
// the room of messages that never reached the pipeline.
func TestRoomOfAReadComesBackWithItsLastMessage(t *testing.T) {
	b := membudget.New(1000, nil)
	l := &roomLedger{budget: b}
	take := func(n int64) int64 {
		got, err := b.Take(context.Background(), n, n)
		if err != nil || got != n {
			t.Fatalf("Take(%d) = %d, %v", n, got, err)
		}
		return n
	}
	used := func(want int64) {
		t.Helper()
		if got := b.Used(); got != want {
			t.Fatalf("budget holds %d, want %d", got, want)
		}
	}
	// A read of 10 records converted in two parts of 5 messages, then a
	// read of 4 records converted whole.
	room := take(300)
	l.charge(&room, 0, 5, 10, 5)
	l.charge(&room, 5, 10, 10, 5)
	second := take(100)
	l.charge(&second, 0, 4, 4, 4)
	used(400)
	l.resolve(9)
	used(400) // one message of the first read is out
	l.resolve(1)
	used(100)
	l.resolve(3)
	used(100)
	// A third read, half converted, then the reader stops with two
	// messages in the pipeline: the second read's last one, and one of the
	// third's.
	third := take(200)
	l.charge(&third, 0, 4, 8, 4)
	l.give(third) // its unconverted records: the reader never keeps them
	used(200)
	l.exited(2)
	used(200) // the third read's buffers are held by its message in flight
	l.resolve(2)
	used(0)

	// A read whose first record is an aggregate of more user records than
	// a part holds: its first two parts both start at record 0.
	agg := take(400)
	l.charge(&agg, 0, 0, 2, 1024) // inside record 0
	l.charge(&agg, 0, 2, 2, 477)  // its rest, and record 1
	next := take(100)
	l.charge(&next, 0, 3, 3, 3)
	l.resolve(1501)
	used(100)
	l.resolve(3)
	used(0)

	// Messages a batch policy flushed: their room is forced on the budget
	// when they go out, and comes back as they are resolved.
	l.flushed(5, 250)
	used(250)
	l.resolve(5)
	used(0)
}
