package shard

import (
	"strings"
	"testing"
)

func TestCompareSequence(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1", "1", 0},
		{"9", "10", -1},
		{"10", "9", 1},
		{"0009", "10", -1},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899", -1},
		{"49590338271490256608559692540925702759324208523137515618", "4959033827149025660855969253836157109592157598913658889", 1},
		{"0", "", 0},
	}
	for _, c := range cases {
		if got := CompareSequence(c.a, c.b); got != c.want {
			t.Errorf("CompareSequence(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestValidSequence(t *testing.T) {
	for s, want := range map[string]bool{
		"": false, "12": true, "1a": false, " 1": false, "-1": false, "0": true, "012": false,
		strings.Repeat("9", 129): true, strings.Repeat("9", 130): false, strings.Repeat("1", 1000): false,
	} {
		if got := ValidSequence(s); got != want {
			t.Errorf("ValidSequence(%q) = %v, want %v", s, got, want)
		}
	}
}
