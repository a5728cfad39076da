package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
)

// fleetDynamoDB is what the fleet's lease table took over the run, as the
// proxy in front of dynalite counted it: calls and capacity units a second.
type fleetDynamoDB struct {
	calls    map[string]float64 // by operation, a second
	wru, rru float64            // write and read units a second
}

func tallyDynamoDB(c0 map[string]int64, u0 map[string]float64, c1 map[string]int64, u1 map[string]float64, ran time.Duration) fleetDynamoDB {
	secs := ran.Seconds()
	t := fleetDynamoDB{calls: map[string]float64{}}
	for op, n := range c1 {
		if n == c0[op] {
			continue
		}
		t.calls[op] = float64(n-c0[op]) / secs
		if ddbcost.IsWrite(op) {
			t.wru += (u1[op] - u0[op]) / secs
		} else {
			t.rru += (u1[op] - u0[op]) / secs
		}
	}
	return t
}

// printFleetDynamoDB prints the lease table's calls and units a second over
// the run and what they would cost a month on demand (ddbcost's prices),
// per shard and per instance. The instances are those running on average
// over the run (two, then three, then two), from the scrapes that found
// them up.
func printFleetDynamoDB(w io.Writer, t fleetDynamoDB, instances []*fleetInstance) {
	shards := 0
	for _, s := range fleetStreams {
		shards += s.shards
	}
	up, rounds := 0, map[int]bool{}
	for _, in := range instances {
		for _, s := range in.scrapes {
			rounds[int(s.at+0.5)] = true
			if !s.stopped {
				up++
			}
		}
	}
	avg := float64(len(instances))
	if up > 0 {
		avg = float64(up) / float64(len(rounds))
	}
	total := 0.0
	var ops []string
	for _, op := range slices.Sorted(maps.Keys(t.calls)) {
		total += t.calls[op]
		ops = append(ops, fmt.Sprintf("%s %.1f", op, t.calls[op]))
	}
	month := ddbcost.Monthly(t.wru, t.rru)
	fmt.Fprintf(w, "\nDynamoDB over the run (counted at a proxy in front of dynalite): %.1f calls/s (%s); %.1f write and %.1f read units/s\n",
		total, strings.Join(ops, ", "), t.wru, t.rru)
	fmt.Fprintf(w, "on demand: $%.2f a month, $%.3f per shard (%d), $%.2f per instance (%.1f running on average)\n",
		month, month/float64(shards), shards, month/avg, avg)
}
