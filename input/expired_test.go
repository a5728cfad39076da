package input

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestTrimFallbackFilter: a read from TRIM_HORIZON in place of a refused start
// keeps exactly what that start would have read, and reports the start's
// record as expired only when the first record seen lies after it.
func TestTrimFallbackFilter(t *testing.T) {
	recs := func(seqs ...int) []types.Record {
		out := make([]types.Record, len(seqs))
		for i, s := range seqs {
			// Of different lengths: the order is numeric, not textual.
			out[i].SequenceNumber = aws.String(fmt.Sprint(s))
		}
		return out
	}
	seqs := func(rs []types.Record) string {
		var out []string
		for _, r := range rs {
			out = append(out, *r.SequenceNumber)
		}
		return fmt.Sprint(out)
	}
	after := shard.Start{Kind: shard.AfterSequence, Sequence: "100"}
	at := shard.Start{Kind: shard.AtSequence, Sequence: "100"}
	type read struct {
		in      []types.Record
		kept    string
		expired bool
	}
	for _, tc := range []struct {
		name  string
		from  shard.Start
		reads []read
	}{
		{"after, still there", after, []read{
			{recs(), "[]", false}, // an empty read decides nothing
			{recs(98, 99), "[]", false},
			{recs(100, 101, 102), "[101 102]", false},
			{recs(103), "[103]", false},
		}},
		{"at, still there", at, []read{
			{recs(99, 100, 101), "[100 101]", false},
		}},
		{"after, trimmed", after, []read{
			{recs(), "[]", false},
			{recs(150, 151), "[150 151]", true},
			{recs(152), "[152]", false}, // reported once
		}},
		{"at, trimmed", at, []read{
			{recs(101, 102), "[101 102]", true},
		}},
		{"after, the last record trimmed, nothing after it yet", after, []read{
			{recs(), "[]", false},
			{recs(9000), "[9000]", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &trimFallback{from: tc.from}
			for i, rd := range tc.reads {
				kept, expired := f.filter(rd.in)
				if seqs(kept) != rd.kept || expired != rd.expired {
					t.Fatalf("read %d %s: kept %s expired %v, want %s %v", i, seqs(rd.in), seqs(kept), expired, rd.kept, rd.expired)
				}
			}
		})
	}
}
