package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
)

// checkpointCommand is the `checkpoint` subcommand: it shows where each
// shard of a stream stands, moves positions, and imports them from other
// consumers' tables, in the local store or in a lease table.
func checkpointCommand() *cli.Command {
	force := &cli.BoolFlag{Name: "force", Usage: "with --table: write even though leases name an owner or instances announced themselves (for instances that were killed; a running holder loses its lease at its next write); with --after-sequence: set a sequence number that no record of the shard has"}
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "Inspect, move and import the checkpoints of a stream",
		Description: "Static credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n" +
			"AWS_SESSION_TOKEN) or the shared config, as for any AWS SDK program.",
		Subcommands: []*cli.Command{{
			Name:  "show",
			Usage: "Show every shard's position, start and owner, from --dir or --table",
			Description: "Reads without taking the store's lock: safe while pipelines run. Positions are\n" +
				"sequence numbers, with /N for the N-th user record inside a KPL aggregate.",
			Flags:  append(append(streamFlags(), storeFlags()...), &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"}),
			Action: streamAction(showCheckpoints),
		}, {
			Name:  "set",
			Usage: "Move a stream, or some of its shards, to where the next run reads from",
			Description: "Give one of --to-trim-horizon, --to-latest, --to-timestamp or --after-sequence.\n" +
				"Without --shard every shard of the stream is moved: a rewind to a time reads each\n" +
				"shard from that time, parents before children. With --shard only the shards named\n" +
				"and their descendants (split or merged from them) are moved, the descendants to the\n" +
				"same time, or to their beginning after --after-sequence.\n\n" +
				"Refused while a pipeline reads the stream: stop every instance first (the local\n" +
				"store is locked by its pipeline; with --table, see --force).",
			Flags: append(append(streamFlags(), storeFlags()...),
				&cli.StringSliceFlag{Name: "shard", Usage: "a shard to move (repeat for several; default: every shard)"},
				&cli.BoolFlag{Name: "to-trim-horizon", Usage: "read from the oldest record kept"},
				&cli.BoolFlag{Name: "to-latest", Usage: "read only records written from now on"},
				&cli.StringFlag{Name: "to-timestamp", Usage: "read records written at or after this time: RFC 3339 (2024-05-01T00:00:00Z) or a duration back from now (-2h)"},
				&cli.StringFlag{Name: "after-sequence", Usage: "read the records after this sequence number (exactly one --shard)"},
				force,
			),
			Action: streamAction(setCheckpoints),
		}, {
			Name:  "import",
			Usage: "Import the positions of an aws_kinesis checkpoint table, a KCL lease table or a group of a lease table of this input",
			Description: "Reads the positions another consumer of the stream stored, and writes them to\n" +
				"--dir or --table, so that the next run reads on after them: nothing lost, nothing\n" +
				"read twice. Stop the other consumer first.\n\n" +
				"--from aws_kinesis: the DynamoDB table of the aws_kinesis input of Benthos, Redpanda\n" +
				"Connect or Bento (keys StreamID and ShardID). aws_kinesis deletes a shard's item once\n" +
				"it has read the shard to its end, so a closed shard without one is taken as read.\n" +
				"--from kcl: the lease table of a KCL 1.x or 2.x application (its application name;\n" +
				"leaseKey a shard id, or account:stream:epoch:shard in multi-stream mode).\n" +
				"--from benthos-kinesis: a lease table of this input (checkpoint.dynamodb.table), the\n" +
				"group --from-group of it (default: no group): to start a new group, or another table,\n" +
				"where another left off.\n" +
				"Shards the table does not mention are read from their beginning.",
			Flags: append(append(streamFlags(), storeFlags()...),
				&cli.StringFlag{Name: "from", Usage: "the layout of --from-table: aws_kinesis, kcl or benthos-kinesis (required)", Required: true},
				&cli.StringFlag{Name: "from-group", Usage: "benthos-kinesis: the group of --from-table to import from (default: none, the table's items of no group)"},
				&cli.StringFlag{Name: "from-table", Usage: "the DynamoDB table to import from, reached with the stream's --region, --profile and --role (required)", Required: true},
				&cli.StringFlag{Name: "from-dynamodb-endpoint", Usage: "a custom DynamoDB endpoint URL for --from-table (default: --dynamodb-endpoint)"},
				&cli.StringFlag{Name: "from-stream-id", Usage: "aws_kinesis: the StreamID of the stream's items (default: the stream's name, else its ARN)"},
				&cli.DurationFlag{Name: "kcl-failover-time", Usage: "kcl: the application's failoverTimeMillis: a lease whose leaseCounter moves within it has a live owner, and the import is refused (see --force)", Value: 10 * time.Second},
				&cli.StringFlag{Name: "kcl-initial-timestamp", Usage: "kcl: the application's initial timestamp, for shards whose checkpoint is AT_TIMESTAMP (RFC 3339)"},
				&cli.BoolFlag{Name: "create-table", Usage: "with --table: create the lease table if it does not exist", Value: true},
				force,
			),
			Action: streamAction(importCheckpoints),
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
	// Broken says why what is stored for the shard cannot be read from:
	// the input does not read the shard until it is set again.
	Broken string `json:"broken,omitempty"`

	cp *checkpoint.Checkpoint // as stored, when it could be read
}

func showCheckpoints(ctx context.Context, c *cli.Context, t streamTarget) error {
	if err := checkStoreFlags(c); err != nil {
		return err
	}
	var rows []shardRow
	if c.String("table") != "" {
		tb, err := storeTable(ctx, c, t, false)
		if err != nil {
			return err
		}
		sc, err := tb.Scan(ctx, t.streamARN)
		if err != nil {
			return err
		}
		broken, err := brokenItems(ctx, t, tb, sc)
		if err != nil {
			// What the scan shows is still worth seeing.
			fmt.Fprintf(stderrOf(c), "warning: items at the keys of listed shards without a scanned item were not checked: %v\n", err)
			broken = sc.BrokenShards()
		}
		for _, it := range sc.Shards {
			if _, ok := broken[it.ShardID]; ok {
				continue
			}
			r := rowOf(it.ShardID, it.Checkpoint)
			r.Owner, r.Counter = it.Owner, it.Counter
			rows = append(rows, r)
		}
		for id, items := range broken {
			var why []string
			for _, b := range items {
				why = append(why, b.Err.Error())
			}
			rows = append(rows, shardRow{Shard: id, Broken: strings.Join(why, "; ")})
		}
	} else {
		dir := c.String("dir")
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			abs, _ := filepath.Abs(dir)
			return fmt.Errorf("--dir: checkpoint directory %q (%s) does not exist: name the directory of checkpoint.dir (a relative path is taken from the working directory the pipeline runs in)", dir, abs)
		}
		st, err := checkpoint.Read(dir, t.streamARN)
		if err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		for id, cp := range st.Shards {
			r := rowOf(id, cp)
			if cp.Broken != nil {
				r.Broken = cp.Broken.Error()
			}
			rows = append(rows, r)
		}
	}
	if err := markContradicted(ctx, t, rows); err != nil {
		fmt.Fprintf(stderrOf(c), "warning: the positions were not checked against the stream's shards: %v\n", err)
	}
	return printRows(t, rows, c.Bool("json"))
}

// stderrOf is where a command's warnings go.
func stderrOf(c *cli.Context) io.Writer {
	if c.App.ErrWriter != nil {
		return c.App.ErrWriter
	}
	return os.Stderr
}

// markContradicted marks BROKEN the rows whose stored checkpoint the
// stream's listing proves wrong (an end on an open shard, a position outside
// the shard): the input does not read them.
func markContradicted(ctx context.Context, t streamTarget, rows []shardRow) error {
	shards, err := listShards(ctx, t.client, t.streamARN)
	if err != nil {
		return err
	}
	byID := map[string]coord.Shard{}
	for _, s := range shards {
		byID[s.id] = coord.Shard{ID: s.id, StartSeq: s.start, EndSeq: s.end, Listed: true}
	}
	for i, r := range rows {
		if r.Broken != "" || r.cp == nil {
			continue
		}
		if err := coord.Contradicts(byID[r.Shard], *r.cp); err != nil {
			rows[i].Broken = err.Error()
		}
		if p := r.cp.Position; p != nil {
			if err := coord.OutsideShard(byID[r.Shard], p.Sequence); err != nil {
				rows[i].Broken = "the stored position: " + err.Error()
			}
		}
	}
	return nil
}

// printRows prints shards sorted by id, as a table or as JSON.
func printRows(t streamTarget, rows []shardRow, asJSON bool) error {
	slices.SortFunc(rows, func(a, b shardRow) int { return strings.Compare(a.Shard, b.Shard) })
	if asJSON {
		enc := json.NewEncoder(t.out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"stream_arn": t.streamARN, "shards": rows})
	}
	w := tabwriter.NewWriter(t.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tPOSITION\tSTART\tOWNER")
	for _, r := range rows {
		pos := r.Position
		switch {
		case r.Broken != "":
			pos = "BROKEN (see below)"
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
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Broken != "" {
			fmt.Fprintf(t.out, "\n%s is BROKEN, not read until set again (checkpoint set --shard %s): %s\n", r.Shard, r.Shard, r.Broken)
		}
	}
	return nil
}

func rowOf(id string, cp checkpoint.Checkpoint) shardRow {
	r := shardRow{Shard: id, Ended: cp.Ended, Start: cp.Start.Kind, cp: &cp}
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
