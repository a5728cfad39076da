package read

import (
	"strings"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestOutOfRange: a sequence start below the shard's first sequence number,
// or above the last of a closed shard, is out of its range; other starts,
// and shards not listed, are never.
func TestOutOfRange(t *testing.T) {
	open := shardInfo{id: "s", startSeq: "100"}
	closed := shardInfo{id: "s", startSeq: "100", endSeq: "200"}
	after := func(seq string) shard.Start { return shard.Start{Kind: shard.AfterSequence, Sequence: seq} }
	for _, tc := range []struct {
		name  string
		start shard.Start
		sh    shardInfo
		out   bool
	}{
		{"below an open shard", after("99"), open, true},
		{"its first", after("100"), open, false},
		{"far above an open shard", after("99999999999999999999999999"), open, false},
		{"above a closed shard", after("201"), closed, true},
		{"a closed shard's last", after("200"), closed, false},
		{"an end below the start is no end", after("300"), shardInfo{id: "s", startSeq: "100", endSeq: "9"}, false},
		{"at, below", shard.Start{Kind: shard.AtSequence, Sequence: "5"}, open, true},
		{"trim horizon", shard.Start{Kind: shard.TrimHorizon}, closed, false},
		{"a shard not listed", after("1"), shardInfo{id: "s"}, false},
	} {
		err := outOfRange(tc.start, tc.sh)
		if (err != nil) != tc.out {
			t.Errorf("%s: outOfRange = %v, want out of range %v", tc.name, err, tc.out)
		}
		if err != nil && !strings.Contains(err.Error(), tc.start.Sequence) {
			t.Errorf("%s: %q does not name the sequence number", tc.name, err)
		}
	}
}
