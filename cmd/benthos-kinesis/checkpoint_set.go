package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// setCheckpoints is `checkpoint set`: it moves shards to where the next run
// reads from.
func setCheckpoints(ctx context.Context, c *cli.Context, t streamTarget) error {
	var chosen []string
	var start checkpoint.Start
	for _, f := range []string{"to-trim-horizon", "to-latest", "to-timestamp", "after-sequence"} {
		if c.IsSet(f) {
			chosen = append(chosen, "--"+f)
		}
	}
	switch {
	case len(chosen) == 0:
		return errors.New("say where to: give one of --to-trim-horizon, --to-latest, --to-timestamp or --after-sequence")
	case len(chosen) > 1:
		return fmt.Errorf("%s name several places: give one", strings.Join(chosen, " and "))
	}
	after := c.String("after-sequence")
	switch {
	case c.Bool("to-trim-horizon"):
		start = checkpoint.Start{Kind: shard.TrimHorizon.String()}
	case c.Bool("to-latest"):
		// Latest is pinned as the time it means now, as start_from latest
		// is: records written between this command and the next run are
		// read.
		start = checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: time.Now()})
	case c.IsSet("to-timestamp"):
		ts, err := checkpoint.ParseTime(c.String("to-timestamp"), time.Now())
		if err != nil {
			return fmt.Errorf("--to-timestamp %q: %w", c.String("to-timestamp"), err)
		}
		start = checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: ts})
	default:
		if !shard.ValidSequence(after) {
			return fmt.Errorf("--after-sequence %q: not a sequence number (1 to 129 decimal digits, no leading zero)", after)
		}
		if len(c.StringSlice("shard")) != 1 {
			return errors.New("--after-sequence names a record of one shard: give exactly one --shard")
		}
		start = checkpoint.Start{Kind: shard.TrimHorizon.String()}
	}

	shards, err := listShards(ctx, t.client, t.streamARN)
	if err != nil {
		return err
	}
	byID := map[string]streamShard{}
	for _, s := range shards {
		byID[s.id] = s
	}
	changes := map[string]checkpoint.Checkpoint{}
	named := c.StringSlice("shard")
	for _, id := range named {
		s, ok := byID[id]
		if !ok {
			return fmt.Errorf("--shard %q: no such shard in stream %s (within its retention)", id, t.streamARN)
		}
		cp := checkpoint.Checkpoint{Start: start, ShardStart: s.start}
		if after != "" {
			if err := checkPosition(ctx, t.client, t.streamARN, s, after, "--after-sequence", !c.Bool("force")); err != nil {
				return err
			}
			cp.Position = &checkpoint.Position{Sequence: after}
		}
		changes[id] = cp
		for _, d := range descendants(shards, id) {
			if _, own := changes[d]; !own {
				ds := start
				if after != "" {
					ds = checkpoint.Start{Kind: shard.TrimHorizon.String()}
				}
				changes[d] = checkpoint.Checkpoint{Start: ds, ShardStart: byID[d].start}
			}
		}
	}
	if len(named) == 0 {
		for _, s := range shards {
			changes[s.id] = checkpoint.Checkpoint{Start: start, ShardStart: s.start}
		}
	}

	w, err := openWritable(ctx, c, t, false)
	if err != nil {
		return err
	}
	defer w.close()
	if err := w.write(ctx, changes, shards, len(named) == 0, c.Bool("force")); err != nil {
		return err
	}
	fmt.Fprintf(t.out, "Moved %d shards of stream %s in the %s; the next run reads them from:\n", len(changes), t.streamARN, w.where)
	var rows []shardRow
	for id, cp := range changes {
		rows = append(rows, rowOf(id, cp))
	}
	return printRows(t, rows, false)
}

func endOf(s streamShard) string {
	if s.closed {
		return s.end
	}
	return "now (open)"
}
