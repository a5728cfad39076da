package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/urfave/cli/v2"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// imported is what another consumer's table says of one shard.
type imported struct {
	cp     checkpoint.Checkpoint
	holder string // a live lease of the other consumer, to refuse on
	// kclOwner and kclCounter are a KCL lease's leaseOwner and
	// leaseCounter, to tell whether its owner lives (kclLive).
	kclOwner, kclCounter string
}

// importCheckpoints is `checkpoint import`.
func importCheckpoints(ctx context.Context, c *cli.Context, t streamTarget) error {
	from, table := c.String("from"), c.String("from-table")
	if from != "aws_kinesis" && from != "kcl" && from != fromOwnTable {
		return fmt.Errorf("--from %q: expected aws_kinesis, kcl or %s", from, fromOwnTable)
	}
	if g := c.String("from-group"); g != "" {
		if from != fromOwnTable {
			return fmt.Errorf("--from-group applies to --from %s only", fromOwnTable)
		}
		if err := lease.CheckGroup(g); err != nil {
			return fmt.Errorf("--from-group %q: %w", g, err)
		}
	}
	endpoint := c.String("from-dynamodb-endpoint")
	if endpoint == "" {
		endpoint = c.String("dynamodb-endpoint")
	}
	// The table imported from (a KCL application's, another input's) is
	// reached as the stream is: it is usually the stream's neighbour.
	var items []map[string]types.AttributeValue
	var err error
	if from != fromOwnTable {
		if items, err = scanAll(ctx, awsclient.DynamoDB(t.cfg, endpoint), table); err != nil {
			return err
		}
	}
	var got map[string]imported
	var looked string
	var aside []string // what the table held besides positions of the stream
	switch from {
	case fromOwnTable:
		got, looked, err = fromLeaseGroup(ctx, awsclient.DynamoDB(t.cfg, endpoint), table, c.String("from-group"), t)
	case "aws_kinesis":
		got, looked, err = fromAWSKinesis(items, t, c.String("from-stream-id"), time.Now())
	case "kcl":
		var initial *time.Time
		if s := c.String("kcl-initial-timestamp"); s != "" {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return fmt.Errorf("--kcl-initial-timestamp %q: not an RFC 3339 time, e.g. 2024-05-01T00:00:00Z", s)
			}
			initial = &ts
		}
		var kcl kclTable
		kcl, err = fromKCL(items, t, initial, time.Now())
		got, looked, aside = kcl.leases, kcl.looked, kcl.asideSaid()
		if err == nil {
			err = kclLive(ctx, got, func() (map[string]imported, error) {
				items, err := scanAll(ctx, awsclient.DynamoDB(t.cfg, endpoint), table)
				if err != nil {
					return nil, err
				}
				again, err := fromKCL(items, t, initial, time.Now())
				return again.leases, err
			}, c.Duration("kcl-failover-time"), stderrOf(c))
		}
	}
	if err != nil {
		return fmt.Errorf("--from-table %s: %w", table, err)
	}
	if len(got) == 0 && from == fromOwnTable {
		return fmt.Errorf("--from-table %s holds no position of stream %s (%s)", table, t.streamARN, looked)
	}
	if len(got) == 0 {
		if len(aside) > 0 {
			looked += "; " + strings.Join(aside, ", ")
		}
		return fmt.Errorf("--from-table %s holds no position of stream %s (%d items, none with %s)", table, t.streamARN, len(items), looked)
	}
	var held []string
	for id, im := range got {
		if im.holder != "" {
			held = append(held, fmt.Sprintf("shard %s: %s", id, im.holder))
		}
	}
	sort.Strings(held)
	if len(held) > 0 && !c.Bool("force") {
		return fmt.Errorf("--from-table %s shows its consumer still reading (%s): stop it first, or give --force if it is stopped", table, strings.Join(held, "; "))
	}

	shards, err := listShards(ctx, t.client, t.streamARN)
	if err != nil {
		return err
	}
	changes, notes := importPlan(shards, got, from)
	byID := map[string]streamShard{}
	for _, s := range shards {
		byID[s.id] = s
	}
	for _, id := range slices.Sorted(maps.Keys(changes)) {
		if p := changes[id].Position; p != nil {
			if err := checkPosition(ctx, t.client, t.streamARN, byID[id], p.Sequence, fmt.Sprintf("--from-table %s, shard %s", table, id), false); err != nil {
				return err
			}
		}
	}
	w, err := openWritable(ctx, c, t, c.Bool("create-table"))
	if err != nil {
		return err
	}
	defer w.close()
	if err := w.write(ctx, changes, shards, true, c.Bool("force")); err != nil {
		return err
	}
	n := 0
	for id := range got {
		if _, ok := byID[id]; ok {
			n++
		}
	}
	fmt.Fprintf(t.out, "Imported the positions of %d shards of stream %s from %s table %s into the %s.\n", n, t.streamARN, from, table, w.where)
	for _, n := range notes {
		fmt.Fprintln(t.out, n)
	}
	if len(aside) > 0 {
		fmt.Fprintf(t.out, "Left aside, as no position of this stream: %s.\n", strings.Join(aside, ", "))
	}
	var rows []shardRow
	for id, cp := range changes {
		rows = append(rows, rowOf(id, cp))
	}
	return printRows(t, rows, false)
}

// fromOwnTable is --from for a lease table of this input.
const fromOwnTable = "benthos-kinesis"

// fromLeaseGroup reads the positions a group of a lease table of this input
// holds for the stream (the default group when group is empty). A lease
// someone holds is a consumer still reading, refused unless --force; a
// shard whose item cannot be read is refused, as the input would not read
// it either.
func fromLeaseGroup(ctx context.Context, api *dynamodb.Client, table, group string, t streamTarget) (map[string]imported, string, error) {
	tb, err := lease.Open(ctx, api, table, false)
	if err != nil {
		return nil, "", err
	}
	sc, err := lease.Grouped(tb, group).ScanConsistent(ctx, t.streamARN)
	if err != nil {
		return nil, "", err
	}
	if len(sc.Broken) > 0 {
		var errs []error
		for _, b := range sc.Broken {
			errs = append(errs, b.Err)
		}
		return nil, "", fmt.Errorf("items it holds cannot be read (set them with checkpoint set first): %w", errors.Join(errs...))
	}
	out := map[string]imported{}
	for _, it := range sc.Shards {
		im := imported{cp: it.Checkpoint}
		if it.Owner != "" {
			im.holder = "leased by instance " + it.Owner
		}
		out[it.ShardID] = im
	}
	looked := "no item of the stream"
	if group != "" {
		looked += " in group " + group
	}
	return out, looked, nil
}

// importPlan decides every listed shard's checkpoint from what the other
// consumer's table says. A shard it does not mention is read from its
// beginning, unless it is closed and known read: aws_kinesis deletes the
// item of a shard it finished; a KCL application reads children only after
// their parents, so a closed shard with a mentioned descendant is done.
func importPlan(shards []streamShard, got map[string]imported, from string) (map[string]checkpoint.Checkpoint, []string) {
	changes := map[string]checkpoint.Checkpoint{}
	var ended, fromStart []string
	for _, s := range shards {
		if im, ok := got[s.id]; ok {
			cp := im.cp
			cp.ShardStart = s.start
			changes[s.id] = cp
			continue
		}
		done := false
		if s.closed {
			done = from == "aws_kinesis"
			for _, d := range descendants(shards, s.id) {
				if _, ok := got[d]; ok {
					done = true
				}
			}
		}
		if done {
			changes[s.id] = checkpoint.Checkpoint{Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}, Ended: true, ShardStart: s.start}
			ended = append(ended, s.id)
			continue
		}
		changes[s.id] = checkpoint.Checkpoint{Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}, ShardStart: s.start}
		fromStart = append(fromStart, s.id)
	}
	var notes []string
	var unlisted []string
	for id := range got {
		if !slices.ContainsFunc(shards, func(s streamShard) bool { return s.id == id }) {
			unlisted = append(unlisted, id)
		}
	}
	if len(unlisted) > 0 {
		slices.Sort(unlisted)
		notes = append(notes, fmt.Sprintf("Not imported: positions of shards not in the stream (gone past its retention period, or of another stream of that name): %s.", strings.Join(unlisted, ", ")))
	}
	if len(ended) > 0 {
		notes = append(notes, fmt.Sprintf("Closed shards without an item there, taken as read to their end: %s.", strings.Join(ended, ", ")))
	}
	if len(fromStart) > 0 {
		notes = append(notes, fmt.Sprintf("Shards without an item there, read from their beginning: %s.", strings.Join(fromStart, ", ")))
	}
	return changes, notes
}

// scanAll reads every item of a table.
func scanAll(ctx context.Context, api *dynamodb.Client, table string) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(api, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("--from-table %s does not exist (at this endpoint and region)", table)
			}
			return nil, fmt.Errorf("--from-table %s: scanning it: %w", table, err)
		}
		out = append(out, page.Items...)
	}
	return out, nil
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// strictS returns the string attribute name of an item ("" when absent);
// one of another type is an error naming the item (what), the attribute,
// its type and value: a default in its place would be another position.
func strictS(item map[string]types.AttributeValue, name, what string) (string, error) {
	v, ok := item[name]
	if !ok {
		return "", nil
	}
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value, nil
	}
	return "", fmt.Errorf("%s: attribute %s is of type %s (%s), expected S (a string)", what, name, lease.AttrType(v), lease.AttrValue(v))
}

// fromAWSKinesis reads the table of the aws_kinesis input (Benthos, Redpanda
// Connect, Bento): hash key StreamID (the stream as its config named it),
// range key ShardID, SequenceNumber the last record acknowledged, ClientID
// and LeaseTimeout the lease of the instance reading the shard (ClientID is
// removed when it stops cleanly).
func fromAWSKinesis(items []map[string]types.AttributeValue, t streamTarget, streamID string, now time.Time) (map[string]imported, string, error) {
	ids := []string{streamID}
	if streamID == "" {
		ids = []string{streamName(t.streamARN), t.streamARN}
	}
	looked := "StreamID " + strings.Join(ids, " or ")
	byID := map[string]map[string]imported{}
	for _, it := range items {
		sid := attrS(it, "StreamID")
		if !slices.Contains(ids, sid) {
			continue
		}
		shardID, err := strictS(it, "ShardID", "an item of StreamID "+sid)
		if err != nil {
			return nil, looked, err
		}
		if shardID == "" {
			return nil, looked, fmt.Errorf("an item of StreamID %s has no ShardID: not an aws_kinesis checkpoint table", sid)
		}
		what := fmt.Sprintf("item StreamID %s, ShardID %s", sid, shardID)
		im := imported{cp: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}}}
		seq, err := strictS(it, "SequenceNumber", what)
		if err != nil {
			return nil, looked, err
		}
		if seq != "" {
			if !shard.ValidSequence(seq) {
				return nil, looked, fmt.Errorf("shard %s: SequenceNumber %q is not a sequence number", shardID, seq)
			}
			// aws_kinesis reads on after it (AFTER_SEQUENCE_NUMBER).
			im.cp.Position = &checkpoint.Position{Sequence: seq}
		}
		client, err := strictS(it, "ClientID", what)
		if err != nil {
			return nil, looked, err
		}
		if client != "" {
			if until, err := time.Parse(time.RFC3339Nano, attrS(it, "LeaseTimeout")); err == nil && until.After(now) {
				im.holder = fmt.Sprintf("leased to aws_kinesis client %s until %s", client, until.UTC().Format(time.RFC3339))
			}
		}
		if byID[sid] == nil {
			byID[sid] = map[string]imported{}
		}
		byID[sid][shardID] = im
	}
	if len(byID) > 1 {
		return nil, looked, fmt.Errorf("items of both StreamID %s and %s: give --from-stream-id to say which to import", ids[0], ids[1])
	}
	for _, m := range byID {
		return m, looked, nil
	}
	return nil, looked, nil
}

// kclTable is what fromKCL found in a KCL application's table.
type kclTable struct {
	leases map[string]imported // by shard id
	looked string              // what a lease of the stream looks like
	// aside counts the items that are no lease of the stream: by
	// entityType (KCL 3.5 keeps worker metrics and coordinator state in
	// the lease table), and leases of other streams.
	aside map[string]int
}

// kclEntities names the kinds of item a KCL 3.5 table holds besides
// leases, by entityType.
var kclEntities = map[string]string{
	"WORKER_METRIC_STATS":      "worker metrics",
	"LEADER":                   "coordinator state (leader lock)",
	"CLIENT_VERSION_MIGRATION": "coordinator state (KCL 2.x to 3.x migration)",
	"TABLE_MIGRATION":          "coordinator state (migration to one table)",
	"STREAM":                   "coordinator state (stream)",
}

// otherStream is aside's key for leases of other streams, or items that
// are no lease at all.
const otherStream = ""

// asideSaid words what was left aside, one phrase per kind.
func (k kclTable) asideSaid() []string {
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(k.aside)) {
		n := fmt.Sprintf("%d items", k.aside[kind])
		if k.aside[kind] == 1 {
			n = "1 item"
		}
		switch what, known := kclEntities[kind]; {
		case kind == otherStream:
			out = append(out, n+" of other streams, or no leases")
		case known:
			out = append(out, fmt.Sprintf("%s of %s (entityType %s)", n, what, kind))
		default:
			out = append(out, fmt.Sprintf("%s of entityType %s, unknown to this import", n, kind))
		}
	}
	return out
}

// fromKCL reads the lease table of a KCL application: leaseKey the shard id
// (or account:stream:creation epoch:shard id in multi-stream mode),
// checkpoint the last record processed or a sentinel, and
// checkpointSubSequenceNumber the last user record processed within it.
// KCL reads on after that user record, and so does the input: the position
// sits inside the record, whose earlier user records (or, for a record that
// is no aggregate, the record itself) are skipped. A KCL 3.5 table also
// holds worker metrics and coordinator state, each item with an entityType
// (LEASE for a lease; KCL 2.x and 3.0-3.4 leases have none): only leases
// are read, the rest counted.
func fromKCL(items []map[string]types.AttributeValue, t streamTarget, initial *time.Time, now time.Time) (kclTable, error) {
	name := streamName(t.streamARN)
	account := ""
	if a, err := arn.Parse(t.streamARN); err == nil {
		account = a.AccountID
	}
	looked := fmt.Sprintf("a leaseKey of a shard id, or %s:%s:<epoch>:<shard id>", account, name)
	out := kclTable{leases: map[string]imported{}, looked: looked, aside: map[string]int{}}
	for _, it := range items {
		if et := attrS(it, "entityType"); et != "" && et != "LEASE" {
			out.aside[et]++
			continue
		}
		key := attrS(it, "leaseKey")
		shardID := ""
		switch parts := strings.Split(key, ":"); {
		case len(parts) == 1 && strings.HasPrefix(key, "shardId-"):
			shardID = key
		case len(parts) == 4 && parts[1] == name && (parts[0] == account || account == ""):
			shardID = parts[3]
		default:
			out.aside[otherStream]++
			continue
		}
		what := "item leaseKey " + key
		cp := checkpoint.Checkpoint{Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}}
		v, err := strictS(it, "checkpoint", what)
		if err != nil {
			return out, err
		}
		owner, err := strictS(it, "leaseOwner", what)
		if err != nil {
			return out, err
		}
		switch v {
		case "TRIM_HORIZON":
		case "LATEST":
			// Nothing processed yet: what the application would have read
			// is what is written from now on.
			cp.Start = checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: now})
		case "AT_TIMESTAMP":
			if initial == nil {
				return out, fmt.Errorf("shard %s: checkpoint AT_TIMESTAMP: the application's initial timestamp is not in the table; give it with --kcl-initial-timestamp", shardID)
			}
			cp.Start = checkpoint.FromShard(shard.Start{Kind: shard.AtTimestamp, Timestamp: *initial})
		case "SHARD_END":
			cp.Ended = true
		default:
			if !shard.ValidSequence(v) {
				return out, fmt.Errorf("shard %s: checkpoint %q is neither a sequence number nor one of TRIM_HORIZON, LATEST, AT_TIMESTAMP, SHARD_END", shardID, v)
			}
			var sub int64
			switch n := it["checkpointSubSequenceNumber"].(type) {
			case nil:
			case *types.AttributeValueMemberN:
				var err error
				if sub, err = strconv.ParseInt(n.Value, 10, 64); err != nil || sub < 0 {
					return out, fmt.Errorf("shard %s: checkpointSubSequenceNumber %q is not a user record index", shardID, n.Value)
				}
			default:
				return out, fmt.Errorf("%s: attribute checkpointSubSequenceNumber is of type %s (%s), expected N (the index of the last user record processed)", what, lease.AttrType(n), lease.AttrValue(n))
			}
			cp.Position = &checkpoint.Position{Sequence: v, SubSequence: sub, Partial: true}
		}
		im := imported{cp: cp}
		if owner != "" {
			im.kclOwner, im.kclCounter = owner, lease.AttrValue(it["leaseCounter"])
		}
		out.leases[shardID] = im
	}
	return out, nil
}

// maxKCLFailover bounds --kcl-failover-time: KCL applications set
// failoverTimeMillis to seconds or a minute; more is a typo the import
// would wait out.
const maxKCLFailover = 10 * time.Minute

// kclLive marks the KCL leases of got whose holder is alive: its
// leaseCounter moved within failover (KCL's own rule: a lease whose counter
// does not move for failoverTimeMillis has expired). It reads the table
// again after failover when any lease has an owner.
func kclLive(ctx context.Context, got map[string]imported, rescan func() (map[string]imported, error), failover time.Duration, say io.Writer) error {
	owned := 0
	for _, im := range got {
		if im.kclOwner != "" {
			owned++
		}
	}
	if owned == 0 {
		return nil
	}
	fmt.Fprintf(say, "%d KCL leases name an owner: waiting --kcl-failover-time (%v) to see whether a KCL worker still renews them\n", owned, failover)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(failover):
	}
	again, err := rescan()
	if err != nil {
		return err
	}
	for id, im := range got {
		now, ok := again[id]
		if im.kclOwner != "" && ok && now.kclOwner != "" && (now.kclOwner != im.kclOwner || now.kclCounter != im.kclCounter) {
			im.holder = fmt.Sprintf("leased to KCL worker %s, whose leaseCounter moved within %v", now.kclOwner, failover)
			got[id] = im
		}
	}
	return nil
}

func streamName(streamARN string) string {
	return streamARN[strings.LastIndex(streamARN, "/")+1:]
}
