package input

import (
	"math"
	"testing"
)

func TestGoMemoryLimitIsTheInputsLimitsAndTheRest(t *testing.T) {
	a, b := &kinesisInput{}, &kinesisInput{}
	for _, c := range []struct {
		limits map[*kinesisInput]int64
		want   int64
	}{
		{nil, math.MaxInt64},
		{map[*kinesisInput]int64{a: 64 << 20}, 88 << 20},
		{map[*kinesisInput]int64{a: 64 << 20, b: 32 << 20}, 120 << 20},
		{map[*kinesisInput]int64{a: 64 << 20, b: 0}, math.MaxInt64}, // one unlimited
	} {
		if got := goMemoryLimitFor(c.limits); got != c.want {
			t.Errorf("limits %v: soft limit %d, want %d", c.limits, got, c.want)
		}
	}
}
