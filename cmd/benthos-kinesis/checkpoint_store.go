package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/urfave/cli/v2"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// streamShard is a shard as ListShards describes it.
type streamShard struct {
	id      string
	parents []string
	closed  bool
	start   string // the shard's starting sequence number
	end     string // its ending sequence number, once closed
}

// listShards lists every shard of the stream still within its retention.
func listShards(ctx context.Context, client *kinesis.Client, streamARN string) ([]streamShard, error) {
	listed, err := awsclient.ListShards(ctx, client, streamARN)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", streamARN, err)
	}
	out := make([]streamShard, len(listed))
	for i, s := range listed {
		sh := streamShard{id: aws.ToString(s.ShardId)}
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if aws.ToString(p) != "" {
				sh.parents = append(sh.parents, *p)
			}
		}
		if r := s.SequenceNumberRange; r != nil {
			sh.start, sh.end = aws.ToString(r.StartingSequenceNumber), aws.ToString(r.EndingSequenceNumber)
			sh.closed = sh.end != ""
		}
		out[i] = sh
	}
	return out, nil
}

// descendants returns the shards of shards that descend from id.
func descendants(shards []streamShard, id string) []string {
	var out []string
	seen := map[string]bool{id: true}
	for grew := true; grew; {
		grew = false
		for _, s := range shards {
			if seen[s.id] {
				continue
			}
			for _, p := range s.parents {
				if seen[p] {
					seen[s.id], grew = true, true
					out = append(out, s.id)
					break
				}
			}
		}
	}
	return out
}

// storeFlags name the store a checkpoint command reads or writes.
func storeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dir", Usage: "the local store's directory (checkpoint.dir)"},
		&cli.StringFlag{Name: "table", Usage: "the lease table (checkpoint.dynamodb.table), instead of --dir"},
		&cli.StringFlag{Name: "dynamodb-endpoint", Usage: "a custom DynamoDB endpoint URL for --table (checkpoint.dynamodb.endpoint)"},
		&cli.StringFlag{Name: "group", Usage: "with --table: the group of pipelines (checkpoint.dynamodb.group; default: none, the table is the group)"},
		&cli.StringFlag{Name: "dynamodb-region", Usage: "with --table: the table's region when it is not the stream's (checkpoint.dynamodb.region)"},
		&cli.StringFlag{Name: "dynamodb-profile", Usage: "with --table: a profile of the shared AWS config for the table, instead of --profile (checkpoint.dynamodb.credentials.profile)"},
		&cli.StringFlag{Name: "dynamodb-role", Usage: "with --table: the ARN of a role to assume for the table, instead of --role (checkpoint.dynamodb.credentials.role)"},
		&cli.StringFlag{Name: "dynamodb-role-external-id", Usage: "with --dynamodb-role: the external id to present when assuming it"},
		&cli.BoolFlag{Name: "dynamodb-credentials-from-stream", Value: true, Usage: "with --table: start from the stream's --profile and --role; false: from the AWS SDK's chain (checkpoint.dynamodb.credentials.from_input)"},
	}
}

// storeTable opens the lease table the flags name, as the group's part of
// it: with the stream's region and credentials unless the --dynamodb-*
// flags give the table's.
func storeTable(ctx context.Context, c *cli.Context, t streamTarget, create bool) (lease.Store, error) {
	cfg, err := tableConfig(ctx, c, t)
	if err != nil {
		return nil, err
	}
	tb, err := lease.Open(ctx, awsclient.DynamoDB(cfg, c.String("dynamodb-endpoint")), c.String("table"), create)
	if errors.Is(err, lease.ErrNoTable) {
		how := "give --table the name of the input's lease table"
		if c.IsSet("create-table") {
			how = "or drop --create-table=false to let this command create it"
		}
		return nil, fmt.Errorf("--table: DynamoDB table %q does not exist: %s", c.String("table"), how)
	}
	if err != nil {
		return nil, fmt.Errorf("--table: %w", err)
	}
	return lease.Grouped(tb, c.String("group")), nil
}

// tableConfig is the AWS configuration of the lease table's calls: the
// stream's, with the --dynamodb-* flags over it as checkpoint.dynamodb's
// region and credentials are over the input's: --dynamodb-profile replaces
// --profile, --dynamodb-role replaces --role, and
// --dynamodb-credentials-from-stream=false starts from the SDK's chain.
func tableConfig(ctx context.Context, c *cli.Context, t streamTarget) (aws.Config, error) {
	region, profile, role, external := c.String("dynamodb-region"), c.String("dynamodb-profile"), c.String("dynamodb-role"), c.String("dynamodb-role-external-id")
	fromStream := c.Bool("dynamodb-credentials-from-stream")
	if external != "" && role == "" {
		return aws.Config{}, errors.New("--dynamodb-role-external-id needs --dynamodb-role")
	}
	if region == "" && profile == "" && role == "" && fromStream {
		return t.cfg, nil
	}
	set := t.set.Over(awsclient.Settings{Region: region, Profile: profile, Role: role, RoleExternalID: external}, !fromStream)
	cfg, err := awsclient.Load(ctx, set)
	if err != nil {
		return aws.Config{}, fmt.Errorf("--table: %w", err)
	}
	return cfg, nil
}

// storeName says which store the flags name, for messages.
func storeName(c *cli.Context) string {
	if t := c.String("table"); t != "" {
		if g := c.String("group"); g != "" {
			return "lease table " + t + " group " + g
		}
		return "lease table " + t
	}
	return "checkpoint directory " + c.String("dir")
}

func checkStoreFlags(c *cli.Context) error {
	dir, table := c.String("dir"), c.String("table")
	switch {
	case dir != "" && table != "":
		return errors.New("--dir and --table name two stores: give one")
	case dir == "" && table == "":
		return errors.New("give the store: --dir (checkpoint.dir) or --table (checkpoint.dynamodb.table)")
	}
	if dir != "" {
		for _, f := range []string{"group", "dynamodb-region", "dynamodb-profile", "dynamodb-role", "dynamodb-role-external-id", "dynamodb-credentials-from-stream"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s applies to --table only: the local store of --dir has no groups and is no DynamoDB table", f)
			}
		}
	}
	return nil
}

// writable is a store that `checkpoint set` and `checkpoint import` change:
// the local store, locked while it is changed (a running pipeline holds
// the lock, so the change is refused), or a lease table, where every
// shard item is written conditional on being as it was read.
type writable struct {
	t     streamTarget
	where string

	file  *checkpoint.File
	state checkpoint.Stream // the local store's, as loaded

	table  lease.Store // the group's part of the table
	group  string
	stream *lease.Stream          // the table's stream item, nil when absent
	items  map[string]lease.Shard // the table's shard items
	live   []string               // instances with a worker item
	// broken holds, by shard, the table's items that are not well-formed
	// shard items: set replaces them (and deletes a second item).
	broken map[string][]lease.BrokenItem
}

func openWritable(ctx context.Context, c *cli.Context, t streamTarget, createTable bool) (*writable, error) {
	if err := checkStoreFlags(c); err != nil {
		return nil, err
	}
	w := &writable{t: t, where: storeName(c)}
	if c.String("table") != "" {
		tb, err := storeTable(ctx, c, t, createTable)
		if err != nil {
			return nil, err
		}
		sc, err := tb.ScanConsistent(ctx, t.streamARN)
		if err != nil {
			return nil, err
		}
		w.table, w.group, w.stream, w.items = tb, c.String("group"), sc.Stream, map[string]lease.Shard{}
		for _, it := range sc.Shards {
			w.items[it.ShardID] = it
		}
		for _, wk := range sc.Workers {
			w.live = append(w.live, wk.ID)
		}
		if w.broken, err = brokenItems(ctx, t, tb, sc); err != nil {
			return nil, err
		}
		return w, nil
	}
	if c.Bool("force") && !c.IsSet("after-sequence") {
		return nil, errors.New("--force applies to --table (or to --after-sequence) only: a pipeline using the local store holds its lock and keeps its positions in memory, so stop it first")
	}
	f, err := checkpoint.OpenFile(c.String("dir"))
	if err != nil {
		return nil, fmt.Errorf("--dir: %w", err)
	}
	st, err := f.Load(ctx, t.streamARN)
	if errors.Is(err, checkpoint.ErrLocked) {
		f.Close()
		return nil, fmt.Errorf("--dir: %w; a pipeline is reading stream %s from this directory: stop it, then run this again", err, t.streamARN)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--dir: %w", err)
	}
	w.file, w.state = f, st
	return w, nil
}

func (w *writable) close() {
	if w.file != nil {
		w.file.Close()
	}
}

// stale reports whether the store describes an earlier stream of the same
// name, deleted since: its checkpoints do not apply.
func (w *writable) stale() bool {
	created := w.state.Created
	if w.table != nil {
		if w.stream == nil {
			return false
		}
		if w.stream.Malformed != "" {
			return true // which stream it described is not known: replaced
		}
		created = w.stream.Created
	}
	return !created.IsZero() && !w.t.created.IsZero() && !created.Equal(w.t.created)
}

// current returns the stored checkpoints of the stream (none for a stale
// store).
func (w *writable) current() map[string]checkpoint.Checkpoint {
	out := map[string]checkpoint.Checkpoint{}
	if w.stale() {
		return out
	}
	if w.table != nil {
		for id, it := range w.items {
			out[id] = it.Checkpoint
		}
		return out
	}
	for id, cp := range w.state.Shards {
		out[id] = cp
	}
	return out
}

// holders lists what reads the given shards of a lease table now, or may:
// leases with an owner and instances that announced themselves.
func (w *writable) holders(ids []string) []string {
	var out []string
	for _, id := range ids {
		if it, ok := w.items[id]; ok && it.Owner != "" {
			out = append(out, fmt.Sprintf("shard %s is leased to %s", id, it.Owner))
		}
	}
	for _, id := range w.live {
		out = append(out, fmt.Sprintf("instance %s has a worker item", id))
	}
	return out
}

// write stores every change; whole says the changes cover every shard of
// the stream, so that a stale store (of a stream deleted since) can be
// replaced. Shards are written one by one; one that changed meanwhile is
// reported, the others are written.
func (w *writable) write(ctx context.Context, changes map[string]checkpoint.Checkpoint, shards []streamShard, whole, force bool) error {
	if w.stale() && !whole {
		return fmt.Errorf("the %s describes an earlier stream %s (deleted and created again since): give no --shard, to write every shard of the new stream", w.where, w.t.streamARN)
	}
	if len(w.current()) == 0 && !whole {
		return fmt.Errorf("the %s holds no checkpoint of stream %s yet: give no --shard, to write every shard (a shard alone would decide where the others start)", w.where, w.t.streamARN)
	}
	if w.table == nil {
		if w.stale() {
			w.state.Shards = map[string]checkpoint.Checkpoint{}
		}
		w.state.ARN, w.state.Created = w.t.streamARN, w.t.created
		for id, cp := range changes {
			w.state.Shards[id] = cp
		}
		return w.file.Save(ctx, w.state)
	}

	ids := slices.Sorted(maps.Keys(changes))
	if held := w.holders(ids); len(held) > 0 && !force {
		return fmt.Errorf("the %s shows instances reading stream %s (%s): stop them and run this again; if they are stopped already (a process killed without stopping leaves its name behind), give --force: a running holder then loses its lease at its next write", w.where, w.t.streamARN, strings.Join(held, "; "))
	}
	parents := map[string][]string{}
	for _, s := range shards {
		parents[s.id] = s.parents
	}
	if w.stream == nil || w.stale() || (whole && !w.stream.Pinned) {
		item := lease.Stream{ARN: w.t.streamARN, Created: w.t.created, Start: checkpoint.Start{Kind: shard.TrimHorizon.String()}, Pinned: true}
		if w.stream != nil && !w.stale() {
			item.Start = w.stream.Start
		}
		if err := w.table.ReplaceStream(ctx, item); err != nil {
			return err
		}
	}
	var failed []string
	for _, id := range ids {
		var prev *lease.Shard
		if it, ok := w.items[id]; ok {
			prev = &it
		}
		want := lease.Shard{Stream: w.t.streamARN, ShardID: id, Checkpoint: changes[id], Parents: parents[id]}
		err := w.replaceBroken(ctx, want)
		if err == nil && !w.brokenAt(lease.GroupShardKey(w.group, want.Stream, want.ShardID)) {
			err = w.table.Overwrite(ctx, want, prev)
		}
		if errors.Is(err, lease.ErrLost) {
			failed = append(failed, id)
			continue
		}
		if err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("shards %s of stream %s changed in the %s while they were being written (an instance is running): stop it and run this again; the other shards were written", strings.Join(failed, ", "), w.t.streamARN, w.where)
	}
	return nil
}

// brokenItems returns, by shard, the malformed items of the stream in a
// lease table: those of the scan, and an item of another shape at the key of
// a listed shard that has no item in the scan (no scan of the stream sees
// an item without its streamArn).
func brokenItems(ctx context.Context, t streamTarget, tb lease.Store, sc lease.Scan) (map[string][]lease.BrokenItem, error) {
	out := sc.BrokenShards()
	scanned := map[string]bool{}
	for _, it := range sc.Shards {
		scanned[it.ShardID] = true
	}
	shards, err := listShards(ctx, t.client, t.streamARN)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range shards {
		if !scanned[s.id] && out[s.id] == nil {
			ids = append(ids, s.id)
		}
	}
	// One read per such shard, 16 at a time: a table where few of
	// thousands of shards have an item is read in a moment.
	found := make([]*lease.BrokenItem, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, _, err := tb.Get(ctx, t.streamARN, id)
			var mal *lease.MalformedItemError
			switch {
			case errors.As(err, &mal):
				b := mal.Broken(id)
				found[i] = &b
			case err != nil:
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, id := range ids {
		if found[i] != nil {
			out[id] = append(out[id], *found[i])
		}
	}
	return out, nil
}

// replaceBroken replaces the malformed item of want's shard by want, and
// deletes any second item of the shard, each while it is as read.
func (w *writable) replaceBroken(ctx context.Context, want lease.Shard) error {
	for _, b := range w.broken[want.ShardID] {
		var err error
		if b.Key == lease.GroupShardKey(w.group, want.Stream, want.ShardID) {
			err = w.table.ReplaceMalformed(ctx, b, &want)
		} else {
			err = w.table.ReplaceMalformed(ctx, b, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// brokenAt reports whether the item at key is a malformed one.
func (w *writable) brokenAt(key string) bool {
	for _, items := range w.broken {
		for _, b := range items {
			if b.Key == key {
				return true
			}
		}
	}
	return false
}

// checkPosition reports a sequence number that is provably no position in
// shard s: below its starting sequence number, above its ending one (a
// closed shard), or refused by the service as a start in the shard (a number
// of another shard, or beyond any record an open shard can hold). A number
// only older than the retention period is a position still: its records are
// gone, and the input reads from the oldest one left. what names the value
// in the error (a flag, or an item of an imported table).
func checkPosition(ctx context.Context, client *kinesis.Client, streamARN string, s streamShard, seq, what string, readBack bool) error {
	refuse := func(why string) error {
		return fmt.Errorf("%s: sequence number %s is not a position in shard %s of stream %s, which holds %s to %s%s: give the sequence number of a record of that shard (its kinesis_sequence_number)",
			what, seq, s.id, streamARN, s.start, endOf(s), why)
	}
	if err := checkpoint.CheckSequence(what, seq); err != nil {
		return err
	}
	if coord.OutsideShard(coord.Shard{ID: s.id, StartSeq: s.start, EndSeq: s.end, Listed: true}, seq) != nil {
		return refuse("")
	}
	_, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamARN: aws.String(streamARN), ShardId: aws.String(s.id),
		ShardIteratorType: ktypes.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seq),
	})
	if err == nil {
		if readBack {
			return checkRecordAt(ctx, client, streamARN, s, seq, what)
		}
		return nil
	}
	code := awserr.Code(err)
	if code != "InvalidArgumentException" && code != "ValidationException" {
		return fmt.Errorf("%s: checking sequence number %s against shard %s of stream %s: %w", what, seq, s.id, streamARN, err)
	}
	var apiErr smithy.APIError
	reason := err.Error()
	if errors.As(err, &apiErr) {
		reason = apiErr.ErrorMessage()
	}
	// Told apart as the input does at a refused start: a number older
	// than the shard's oldest record left was trimmed (a position still,
	// read on from that record); one at or after it was refused for
	// another reason.
	oldest, err := oldestRecord(ctx, client, streamARN, s.id)
	switch {
	case err != nil:
		return fmt.Errorf("%s: the service refuses sequence number %s (%s), and reading shard %s's oldest record to tell why failed: %w", what, seq, reason, s.id, err)
	case oldest == "":
		return refuse(" (the service refuses it: " + reason + "; the shard holds no record to tell whether it is older than the retention period: use --to-trim-horizon)")
	case shard.CompareSequence(oldest, seq) > 0:
		return nil
	}
	return refuse(" (the service refuses it, though the shard's oldest record " + oldest + " is not after it: " + reason + ")")
}

// checkRecordAt refuses a sequence number that the service takes as a
// position in the shard but that names no record of it: a number past the
// shard's newest record (the records written next may get numbers below
// it, and a checkpoint there would skip them for ever), or one between two
// records (a typo). A number older than the oldest record left names a
// record trimmed since: a position still. The service does not refuse the
// first kind (AWS checks a number's range only, and the emulators do not
// even that), so the record is read back.
func checkRecordAt(ctx context.Context, client *kinesis.Client, streamARN string, s streamShard, seq, what string) error {
	at, err := firstRecord(ctx, client, streamARN, s.id, &kinesis.GetShardIteratorInput{
		ShardIteratorType: ktypes.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq),
	})
	if code := awserr.Code(err); err != nil && code != "InvalidArgumentException" && code != "ValidationException" {
		return fmt.Errorf("%s: reading the record of sequence number %s back from shard %s of stream %s: %w (--force sets it unread)", what, seq, s.id, streamARN, err)
	}
	if err == nil && at == seq {
		return nil
	}
	oldest, err := oldestRecord(ctx, client, streamARN, s.id)
	if err != nil {
		return fmt.Errorf("%s: no record of shard %s has sequence number %s, and reading its oldest record failed: %w (--force sets it unread)", what, s.id, seq, err)
	}
	if oldest != "" && shard.CompareSequence(oldest, seq) > 0 {
		return nil // trimmed: reading goes on from the oldest record
	}
	next := "no record of the shard is at or after it: the records written next may be numbered below it and would never be read"
	if after, err := firstRecord(ctx, client, streamARN, s.id, &kinesis.GetShardIteratorInput{
		ShardIteratorType: ktypes.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seq),
	}); err == nil && after != "" {
		next = "the next record of the shard is " + after
	}
	return fmt.Errorf("%s: no record of shard %s of stream %s has sequence number %s (%s): give the sequence number of a record of the shard (its kinesis_sequence_number), or --force to set it all the same",
		what, s.id, streamARN, seq, next)
}

// firstRecord returns the sequence number of the first record an iterator
// of the shard (in: its type and where) reads, or "" when a few reads find
// none.
func firstRecord(ctx context.Context, client *kinesis.Client, streamARN, shardID string, in *kinesis.GetShardIteratorInput) (string, error) {
	in.StreamARN, in.ShardId = aws.String(streamARN), aws.String(shardID)
	it, err := client.GetShardIterator(ctx, in)
	if err != nil {
		return "", err
	}
	iter := it.ShardIterator
	for range 5 { // a shard's trimmed start may take a few empty reads
		if iter == nil {
			return "", nil
		}
		out, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{StreamARN: aws.String(streamARN), ShardIterator: iter, Limit: aws.Int32(1)})
		if err != nil {
			return "", err
		}
		if len(out.Records) > 0 {
			return aws.ToString(out.Records[0].SequenceNumber), nil
		}
		if aws.ToInt64(out.MillisBehindLatest) == 0 {
			return "", nil
		}
		iter = out.NextShardIterator
	}
	return "", nil
}

// oldestRecord returns the sequence number of a shard's oldest record, or ""
// when a few reads from TRIM_HORIZON find none.
func oldestRecord(ctx context.Context, client *kinesis.Client, streamARN, shardID string) (string, error) {
	return firstRecord(ctx, client, streamARN, shardID, &kinesis.GetShardIteratorInput{ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
}
