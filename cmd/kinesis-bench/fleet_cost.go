package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// printFleetDynamoDB prints the lease table's calls and units a second over
// the run and what they would cost a month on demand (ddbcost's prices),
// per shard and per instance. The instances are those running on average
// over the run (two, then three, then two), from the scrapes that found
// them up.
func printFleetDynamoDB(w io.Writer, r emulator.Rates, instances []*fleetInstance) {
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
	var ops []string
	for _, op := range slices.Sorted(maps.Keys(r.Calls)) {
		ops = append(ops, fmt.Sprintf("%s %.1f", op, r.Calls[op]))
	}
	month := ddbcost.Monthly(r.WriteUnits, r.ReadUnits)
	fmt.Fprintf(w, "\nDynamoDB over the run (counted at a proxy in front of dynalite): %.1f calls/s (%s); %.1f write and %.1f read units/s\n",
		r.AllCalls, strings.Join(ops, ", "), r.WriteUnits, r.ReadUnits)
	fmt.Fprintf(w, "on demand: $%.2f a month, $%.3f per shard (%d), $%.2f per instance (%.1f running on average)\n",
		month, month/float64(shards), shards, month/avg, avg)
}
