package read

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestTrimFallbackFilter: a read from TRIM_HORIZON in place of a refused start
// keeps exactly what that start would have read when the first record seen
// lies after it (the start's record was trimmed: expired), and nothing when
// that record lies at or before it (the start's record is still there:
// present, the refusal had another cause). Before, such a read skipped every
// record up to the start: a start beyond every record of the shard skipped
// all of them for good.
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
		present bool
	}
	for _, tc := range []struct {
		name  string
		from  shard.Start
		reads []read
	}{
		{"after, still there", after, []read{
			{recs(), "[]", false, false}, // an empty read decides nothing
			{recs(98, 99), "[]", false, true},
			{recs(100, 101, 102), "[]", false, true}, // and nothing after it
		}},
		{"after, its own record first", after, []read{
			{recs(100, 101), "[]", false, true},
		}},
		{"at, still there", at, []read{
			{recs(99, 100, 101), "[]", false, true},
		}},
		{"at, its own record first", at, []read{
			{recs(100, 101), "[]", false, true},
		}},
		{"beyond every record", shard.Start{Kind: shard.AfterSequence, Sequence: "99999999999999999999"}, []read{
			{recs(5, 6), "[]", false, true},
		}},
		{"after, trimmed", after, []read{
			{recs(), "[]", false, false},
			{recs(), "[]", false, false},
			{recs(150, 151), "[150 151]", true, false},
			{recs(152), "[152]", false, false}, // reported once
		}},
		{"at, trimmed", at, []read{
			{recs(101, 102), "[101 102]", true, false},
		}},
		{"after, the last record trimmed, nothing after it yet", after, []read{
			{recs(), "[]", false, false},
			{recs(9000), "[9000]", true, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &trimFallback{from: tc.from}
			for i, rd := range tc.reads {
				kept, expired := f.filter(rd.in)
				if seqs(kept) != rd.kept || expired != rd.expired || f.present != rd.present {
					t.Fatalf("read %d %s: kept %s expired %v present %v, want %s %v %v", i, seqs(rd.in), seqs(kept), expired, f.present, rd.kept, rd.expired, rd.present)
				}
			}
		})
	}
}
