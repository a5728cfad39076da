package coord

import (
	"strings"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// TestContradictedCheckpointsAreBroken: an end stored for a shard listed
// open is marked broken with the reason and the fix, so that the shard is
// reported and its children wait. Before, such a shard was taken as
// finished and never read again, without a word.
func TestContradictedCheckpointsAreBroken(t *testing.T) {
	t.Parallel()
	const start, end = "49000000000000000000000000000000000000000000000000000100", "49000000000000000000000000000000000000000000000000000900"
	ended := checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, Ended: true}
	cases := []struct {
		name string
		sh   Shard
		cp   checkpoint.Checkpoint
		want string // "" for no contradiction
	}{
		{"ended, listed open", Shard{StartSeq: start, Listed: true}, ended, "SHARD_END), but the service lists it open"},
		{"ended, listed closed", Shard{StartSeq: start, EndSeq: end, Listed: true}, ended, ""},
		{"ended, not listed (learnt from a parent)", Shard{}, ended, ""},
		{"open, not ended", Shard{StartSeq: start, Listed: true}, checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}}, ""},
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
			if cp.Broken == nil || len(marked) != 1 || p.Broken() != 1 {
				t.Fatalf("not marked broken: %+v", cp)
			}
			if msg := cp.Broken.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "checkpoint set --shard s") {
				t.Fatalf("reason %q, want it to say %q and the fix", msg, tc.want)
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

// TestKnownEnd: a listed ending sequence number bounds positions only when
// it is not below the shard's start (kinesis-local lists
// 9223372036854775807 as every closed shard's end).
func TestKnownEnd(t *testing.T) {
	t.Parallel()
	const start = "49000000000000000000000000000000000000000000000000000100"
	for _, tc := range []struct {
		end  string
		want bool
	}{
		{"", false},
		{"9223372036854775807", false},
		{"49000000000000000000000000000000000000000000000000000900", true},
		{start, true},
	} {
		if got := KnownEnd(start, tc.end); got != tc.want {
			t.Errorf("KnownEnd(%s, %q) = %v, want %v", start, tc.end, got, tc.want)
		}
	}
}

// TestOutsideShard: below the start, or above a closed shard's known end,
// is outside; above an open shard's start is not provably so.
func TestOutsideShard(t *testing.T) {
	t.Parallel()
	const start, end = "49000000000000000000000000000000000000000000000000000100", "49000000000000000000000000000000000000000000000000000900"
	open := Shard{ID: "s", StartSeq: start, Listed: true}
	closed := Shard{ID: "s", StartSeq: start, EndSeq: end, Listed: true}
	for _, tc := range []struct {
		sh      Shard
		seq     string
		outside bool
	}{
		{open, strings.Repeat("9", 56), false},
		{open, "4901", true},
		{closed, "49000000000000000000000000000000000000000000000000000901", true},
		{closed, end, false},
		{Shard{ID: "s", StartSeq: start, EndSeq: "9223372036854775807", Listed: true}, "49000000000000000000000000000000000000000000000000000901", false},
		{Shard{ID: "s"}, "4901", false},
	} {
		if err := OutsideShard(tc.sh, tc.seq); (err != nil) != tc.outside {
			t.Errorf("OutsideShard(%+v, %s) = %v, want outside %v", tc.sh, tc.seq, err, tc.outside)
		}
	}
}
