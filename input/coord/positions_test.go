package coord

import (
	"strings"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// TestContradictedCheckpointsAreBroken: a stored position below its
// shard's starting sequence number or above a closed shard's ending one, or
// an end stored for a shard listed open, is marked broken with the reason
// and the fix, so that no reader starts from it. Before, such a position
// was read from: the service refused it, the reader fell back to
// TRIM_HORIZON skipping every record up to it (every record, for a number
// above the shard), and an end on an open shard stopped it for good
// without a word.
func TestContradictedCheckpointsAreBroken(t *testing.T) {
	t.Parallel()
	const start, end = "49000000000000000000000000000000000000000000000000000100", "49000000000000000000000000000000000000000000000000000900"
	at := func(seq string) checkpoint.Checkpoint {
		return checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Position: &checkpoint.Position{Sequence: seq}}
	}
	open := Shard{StartSeq: start, Listed: true}
	closed := Shard{StartSeq: start, EndSeq: end, Listed: true}
	cases := []struct {
		name string
		sh   Shard
		cp   checkpoint.Checkpoint
		want string // "" for no contradiction
	}{
		{"inside an open shard", open, at("49000000000000000000000000000000000000000000000000000500"), ""},
		{"far above an open shard's start", open, at(strings.Repeat("9", 56)), ""},
		{"below the start", open, at("48999999999999999999999999999999999999999999999999999999"), "is not in shard s, which holds " + start + " to now (open)"},
		{"above a closed shard's end", closed, at("49000000000000000000000000000000000000000000000000000901"), "which holds " + start + " to " + end},
		{"inside a closed shard", closed, at("49000000000000000000000000000000000000000000000000000900"), ""},
		{"ended, listed open", open, checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Ended: true}, "SHARD_END), but the service lists it open"},
		{"ended, listed closed", closed, checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Ended: true}, ""},
		{"not listed (learnt from a parent)", Shard{}, at("1"), ""},
		// kinesis-local lists 9223372036854775807 as every closed shard's
		// end: below its start, it bounds nothing.
		{"closed, end below the start", Shard{StartSeq: start, EndSeq: "9223372036854775807", Listed: true}, at("49000000000000000000000000000000000000000000000000000901"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.sh.ID = "s"
			p := NewPositions(checkpoint.Stream{Shards: map[string]checkpoint.Checkpoint{"s": tc.cp}})
			marked := p.Contradicted(map[string]Shard{"s": tc.sh}, func(id string) string { return "run `checkpoint set --shard " + id + "`" })
			cp, _ := p.Of("s")
			if tc.want == "" {
				if len(marked) != 0 || cp.Broken != nil {
					t.Fatalf("marked broken: %v", cp.Broken)
				}
				return
			}
			if cp.Broken == nil || len(marked) != 1 {
				t.Fatalf("not marked broken: %+v", cp)
			}
			if msg := cp.Broken.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "checkpoint set --shard s") {
				t.Fatalf("reason %q, want it to say %q and the fix", msg, tc.want)
			}
			if _, err := cp.Resume(); err == nil {
				t.Fatal("a broken checkpoint resumes")
			}
			if p.EndSaved("s") {
				t.Fatal("an end contradicted by the listing still lets children be read")
			}
			if again := p.Contradicted(map[string]Shard{"s": tc.sh}, func(string) string { return "" }); len(again) != 0 {
				t.Fatalf("marked again at the next listing: %v", again)
			}
		})
	}
}
