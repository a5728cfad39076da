package read

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStreamHealth: a stream is unreadable when every shard it would read
// is stopped or broken (a broken shard, whose reader stops too, counted
// once), or when its listing fails for listingFailsFor with no reader left;
// readable otherwise.
func TestStreamHealth(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name              string
		readable, reading int
		stopped, broken   []string
		listingFailed     time.Duration // ago; 0: the last listing succeeded
		storeFailed       time.Duration // ago; 0: the last commit succeeded
		want              []string      // in the reason; none: readable
	}{
		{name: "every shard read", readable: 2, reading: 2},
		{name: "nothing to read here (held elsewhere, or finished)", readable: 0},
		{name: "one of two stopped", readable: 2, reading: 2, stopped: []string{"s0"}},
		{name: "one of two broken, its reader stopped too", readable: 2, reading: 2, stopped: []string{"s0"}, broken: []string{"s0"}},
		{name: "the only shard stopped", readable: 1, reading: 1, stopped: []string{"s0"},
			want: []string{"stream orders: no shard can be read", "1 stopped on a checkpoint the shard cannot hold (s0; kinesis_shard_stopped)"}},
		{name: "one stopped, one broken", readable: 2, reading: 2, stopped: []string{"s0", "s1"}, broken: []string{"s1"},
			want: []string{"1 stopped", "(s0;", "1 not read because what is stored for them cannot be read (s1; kinesis_broken_checkpoints)"}},
		{name: "the listing fails, a reader reads", readable: 1, reading: 1, listingFailed: time.Minute},
		{name: "the listing fails briefly", listingFailed: listingFailsFor / 2},
		{name: "the listing fails long, nothing read", listingFailed: time.Minute,
			want: []string{"stream orders: its shards cannot be listed for 1m0s and none is read: ResourceNotFoundException"}},
		// A lease table out of reach: the leases lapse, the readers stop.
		{name: "commits fail, a reader reads", readable: 1, reading: 1, storeFailed: time.Minute},
		{name: "commits fail briefly, nothing read", readable: 1, storeFailed: storeFailsFor / 2},
		{name: "commits fail long, nothing read", readable: 2, storeFailed: 40 * time.Second,
			want: []string{"stream orders: its checkpoints cannot be stored for 40s and none of its shards is read: lease table: dial tcp 127.0.0.1:8000: connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h streamHealth
			for _, id := range tc.stopped {
				h.setStopped(id, true)
			}
			broken := map[string]bool{}
			for _, id := range tc.broken {
				broken[id] = true
			}
			h.counted(tc.readable, tc.reading, broken)
			if tc.listingFailed > 0 {
				h.listed(t0.Add(-tc.listingFailed), errors.New("ResourceNotFoundException"))
				h.listed(t0, errors.New("ResourceNotFoundException"))
			}
			if tc.storeFailed > 0 {
				h.committed(t0.Add(-tc.storeFailed), errors.New("lease table: dial tcp 127.0.0.1:8000: connection refused"))
				h.committed(t0, errors.New("lease table: dial tcp 127.0.0.1:8000: connection refused"))
			}
			got := h.unreadable("orders", t0)
			if (got == "") != (len(tc.want) == 0) {
				t.Fatalf("unreadable: %q, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("unreadable: %q does not say %q", got, w)
				}
			}
			// A listing or commit that succeeds, or a shard that reads
			// again, clears it.
			h.listed(t0, nil)
			h.committed(t0, nil)
			for _, id := range tc.stopped {
				h.setStopped(id, false)
			}
			h.counted(tc.readable, tc.reading, nil)
			if got := h.unreadable("orders", t0); got != "" {
				t.Errorf("after the listing succeeded and the shards read again: %q", got)
			}
		})
	}
}
