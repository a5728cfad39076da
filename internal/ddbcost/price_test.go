package ddbcost

import (
	"math"
	"testing"
)

func TestMonthly(t *testing.T) {
	for _, tc := range []struct {
		wps, rps float64
		want     float64
	}{
		{0, 0, 0},
		// 2,592,000 write units a month at $0.625 a million
		{1, 0, 1.62},
		// 2,592,000 read units at $0.125 a million
		{0, 1, 0.324},
		{10, 100, 16.2 + 32.4},
	} {
		if got := Monthly(tc.wps, tc.rps); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Monthly(%v, %v) = %v, want %v", tc.wps, tc.rps, got, tc.want)
		}
	}
}
