package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
)

// checkpointCommand is the `checkpoint` subcommand: it shows where each
// shard of a stream stands, in the local store or in a lease table.
func checkpointCommand() *cli.Command {
	flags := append(streamFlags(),
		&cli.StringFlag{Name: "dir", Usage: "the local store's directory (checkpoint.dir)"},
		&cli.StringFlag{Name: "table", Usage: "the lease table (checkpoint.dynamodb.table), instead of --dir"},
		&cli.StringFlag{Name: "dynamodb-endpoint", Usage: "a custom DynamoDB endpoint URL for --table (checkpoint.dynamodb.endpoint)"},
		&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"},
	)
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "Inspect the checkpoints of a stream",
		Subcommands: []*cli.Command{{
			Name:  "show",
			Usage: "Show every shard's position, start and owner, from --dir or --table",
			Description: "Reads without taking the store's lock: safe while pipelines run. Positions are\n" +
				"sequence numbers, with /N for the N-th user record inside a KPL aggregate.",
			Flags:  flags,
			Action: streamAction(showCheckpoints),
		}},
	}
}

// shardRow is one shard as `checkpoint show` prints it.
type shardRow struct {
	Shard    string `json:"shard"`
	Position string `json:"position,omitempty"` // empty before the first acknowledgement
	Ended    bool   `json:"ended,omitempty"`
	Start    string `json:"start"` // where the shard is read from before any position
	Owner    string `json:"owner,omitempty"`
	Counter  int64  `json:"lease_counter,omitempty"`
}

func showCheckpoints(ctx context.Context, c *cli.Context, t streamTarget) error {
	dir, table := c.String("dir"), c.String("table")
	var rows []shardRow
	switch {
	case dir != "" && table != "":
		return fmt.Errorf("--dir and --table name two stores: give one")
	case table != "":
		tb, err := lease.Open(ctx, awsclient.DynamoDB(t.cfg, c.String("dynamodb-endpoint")), table, false)
		if err != nil {
			return fmt.Errorf("--table: %w", err)
		}
		sc, err := tb.Scan(ctx, t.streamARN)
		if err != nil {
			return err
		}
		for _, it := range sc.Shards {
			r := rowOf(it.ShardID, it.Checkpoint)
			r.Owner, r.Counter = it.Owner, it.Counter
			rows = append(rows, r)
		}
	case dir != "":
		st, err := checkpoint.Read(dir, t.streamARN)
		if err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		for id, cp := range st.Shards {
			rows = append(rows, rowOf(id, cp))
		}
	default:
		return fmt.Errorf("give the store: --dir (checkpoint.dir) or --table (checkpoint.dynamodb.table)")
	}
	slices.SortFunc(rows, func(a, b shardRow) int { return strings.Compare(a.Shard, b.Shard) })
	if c.Bool("json") {
		enc := json.NewEncoder(t.out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"stream_arn": t.streamARN, "shards": rows})
	}
	w := tabwriter.NewWriter(t.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tPOSITION\tSTART\tOWNER")
	for _, r := range rows {
		pos := r.Position
		switch {
		case r.Ended:
			pos = "SHARD_END"
		case pos == "":
			pos = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Shard, pos, r.Start, dash(r.Owner))
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "(no checkpoint of this stream in the store)\t\t\t")
	}
	return w.Flush()
}

func rowOf(id string, cp checkpoint.Checkpoint) shardRow {
	r := shardRow{Shard: id, Ended: cp.Ended, Start: cp.Start.Kind}
	if ts := cp.Start.Timestamp; ts != nil {
		r.Start += " " + ts.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if cp.Position != nil {
		r.Position = cp.Position.String()
	}
	return r
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
