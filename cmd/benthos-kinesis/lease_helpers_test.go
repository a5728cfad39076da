package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// The lease tests run several processes of the binary on one stream of the
// fake Kinesis, sharing its shards through a lease table in dynalite.
const (
	leaseStream    = "orders"
	leaseTableName = "leases"
	// leasePeriod is checkpoint.dynamodb.lease_period of every process
	// unless leaseOpts.period says otherwise.
	leasePeriod = 2 * time.Second
	// leaseShardEnd is the checkpoint of a finished shard.
	leaseShardEnd = "SHARD_END"
	// leaseExitWithin bounds a clean stop on SIGTERM: Benthos's default
	// shutdown_timeout (20 s) and some room.
	leaseExitWithin = 30 * time.Second
	// leaseDrainWithin bounds how long the processes take to output every
	// record once production has stopped.
	leaseDrainWithin = 30 * time.Second
)

// leaseOpts varies a leaseCluster.
type leaseOpts struct {
	shards int // of stream orders
	procs  int
	// efo reads by Enhanced Fan-Out with consumer_name app and the default
	// (lazy) registration; else by polling every 200 ms (the least the
	// input accepts).
	efo bool
	// period is checkpoint.dynamodb.lease_period; zero: leasePeriod.
	period time.Duration
}

// leaseCluster is one test's fake Kinesis (TLS, stream orders), dynalite,
// and processes of the binary numbered from 0, process i with instance_id
// p<i>. A process may be run more than once (a restart keeps its config and
// instance id, with a new output and log file). The fake's quotas are off:
// polling every 200 ms is the whole quota of 5 GetRecords/s per shard, and
// while a lease changes hands two processes may poll one shard; throttling
// would blur the lease timings measured, and the lease table is the
// subject.
type leaseCluster struct {
	t   *testing.T
	bin string
	srv *kinesisfake.Server
	ddb *emulator.DynamoDB
	db  *dynamodb.Client
	dir string
	ca  string
	arn string
	efo bool
	// period is the processes' lease_period.
	period time.Duration
	// procs[i] holds the runs of process i, the last one current.
	procs [][]*leaseRun
}

// leaseRun is one run of a process of the binary.
type leaseRun struct {
	id   string // instance_id
	name string // p<i>-run<k>, the base name of its files
	out  string // its output file, JSON lines
	log  string // its log file, stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // what Wait returned; read after done is closed
	// ending is set once the test has signalled the process to end: an
	// exit before that is a failure.
	ending bool
}

func newLeaseCluster(t *testing.T, o leaseOpts) *leaseCluster {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, ca := startFake(t, dir, kinesisfake.Stream(leaseStream, o.shards), kinesisfake.Quotas(false),
		kinesisfake.ConsumerActivationDelay(500*time.Millisecond))
	ddb := emulator.Dynalite(t)
	c := &leaseCluster{
		t: t, bin: bin, srv: srv, ddb: ddb, dir: dir, ca: ca, efo: o.efo, period: cmp.Or(o.period, leasePeriod),
		db:    ddb.Client(func(o *dynamodb.Options) { o.Region = srv.Region() }),
		arn:   srv.StreamARN(leaseStream),
		procs: make([][]*leaseRun, o.procs),
	}
	// Runs after the processes are killed (cleanups run last-in first-out),
	// so the logs are whole.
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	return c
}

// id is the instance id of process i.
func (c *leaseCluster) id(i int) string { return "p" + strconv.Itoa(i) }

// ids are the instance ids of every process.
func (c *leaseCluster) ids() []string {
	ids := make([]string, len(c.procs))
	for i := range c.procs {
		ids[i] = c.id(i)
	}
	return ids
}

// run is the current run of process i.
func (c *leaseCluster) run(i int) *leaseRun {
	runs := c.procs[i]
	if len(runs) == 0 {
		c.t.Fatalf("process %d was never started", i)
	}
	return runs[len(runs)-1]
}

// runs is every run of every process, in order of process then start.
func (c *leaseCluster) runs() []*leaseRun {
	var all []*leaseRun
	for _, runs := range c.procs {
		all = append(all, runs...)
	}
	return all
}

// startAll starts every process, one after the other.
func (c *leaseCluster) startAll() {
	c.t.Helper()
	for i := range c.procs {
		c.start(i)
	}
}

// start runs process i (again): the same config and instance id, a new
// output and log file. The test's cleanup kills it if it still runs.
func (c *leaseCluster) start(i int) *leaseRun {
	t := c.t
	t.Helper()
	if n := len(c.procs[i]); n > 0 && !c.run(i).exited() {
		t.Fatalf("process %d is already running", i)
	}
	r := &leaseRun{id: c.id(i), name: fmt.Sprintf("p%d-run%d", i, len(c.procs[i])+1), done: make(chan struct{})}
	r.out = filepath.Join(c.dir, r.name+".jsonl")
	r.log = filepath.Join(c.dir, r.name+".log")
	config := filepath.Join(c.dir, r.name+".yaml")
	if err := os.WriteFile(config, []byte(c.config(r.id, r.out)), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(c.bin, "run", config)
	stamped := &stampedLines{w: logFile, start: true}
	r.cmd.Stdout, r.cmd.Stderr = stamped, stamped
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	// One goroutine owns Wait, so that exits are awaited with a deadline.
	go func() {
		r.err = r.cmd.Wait()
		logFile.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		if !r.exited() {
			r.cmd.Process.Kill() // also ends a stopped process
		}
		<-r.done
	})
	c.procs[i] = append(c.procs[i], r)
	return r
}

// config is the YAML of a process: records go to out as JSON lines of
// stream, data, shard, seq, sub and pk, one pipeline thread keeping each
// shard's order. It logs at DEBUG (a few lines a second: what the lease
// core took, asked and handed over), so that the logs a failed test dumps
// tell why a lease moved when it did.
func (c *leaseCluster) config(id, out string) string {
	reader := "reader: polling\n    polling: { interval: 200ms }"
	if c.efo {
		reader = "reader: efo\n    efo: { consumer_name: app }"
	}
	return fmt.Sprintf(`
http: { enabled: false }
input:
  aws_kinesis_streams:
    streams: [ %s ]
    endpoint: %s
    region: %s
    credentials: { id: %s, secret: %s }
    tls: { enabled: true, root_cas_file: %s }
    %s
    start_from: trim_horizon
    checkpoint:
      commit_period: 200ms
      dynamodb:
        table: %s
        create: true
        endpoint: %s
        lease_period: %s
        instance_id: %s
pipeline:
  threads: 1
  processors:
%soutput:
  file: { path: %s, codec: lines }
logger: { level: debug }
`, leaseStream, c.srv.Endpoint(), c.srv.Region(), emulator.AccessKeyID, emulator.SecretAccessKey, c.ca, reader,
		leaseTableName, c.ddb.Endpoint, c.period, id, recordMapping, out)
}

func (r *leaseRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the current run of process i.
func (c *leaseCluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	r := c.run(i)
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		r.ending = true
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("%s to process %d: %v", sig, i, err)
	}
}

// checkAlive fails the test if a process exited on its own.
func (c *leaseCluster) checkAlive() {
	c.t.Helper()
	for _, r := range c.runs() {
		if r.exited() && !r.ending {
			c.t.Fatalf("%s exited on its own: %v", r.name, r.err)
		}
	}
}

// awaitExit waits until r has exited, failing the test after within.
func (c *leaseCluster) awaitExit(r *leaseRun, within time.Duration) {
	c.t.Helper()
	select {
	case <-r.done:
	case <-time.After(within):
		c.t.Fatalf("%s did not exit within %v", r.name, within)
	}
}

// term stops process i with SIGTERM and asserts that it exits with status 0
// within leaseExitWithin.
func (c *leaseCluster) term(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGTERM)
	c.awaitClean(c.run(i))
}

// termAll sends SIGTERM to every running process at once, then asserts that
// each exits with status 0.
func (c *leaseCluster) termAll() {
	c.t.Helper()
	var live []*leaseRun
	for i := range c.procs {
		if r := c.run(i); !r.exited() {
			c.signal(i, syscall.SIGTERM)
			live = append(live, r)
		}
	}
	for _, r := range live {
		c.awaitClean(r)
	}
}

func (c *leaseCluster) awaitClean(r *leaseRun) {
	c.t.Helper()
	c.awaitExit(r, leaseExitWithin)
	if r.err != nil {
		c.t.Fatalf("%s did not stop cleanly on SIGTERM: %v", r.name, r.err)
	}
}

// kill ends process i with SIGKILL and waits until it is gone.
func (c *leaseCluster) kill(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGKILL)
	c.awaitExit(c.run(i), 10*time.Second)
}

// freeze stops process i with SIGSTOP and returns once the kernel reports it
// stopped (state T in /proc/<pid>/stat: Linux only).
func (c *leaseCluster) freeze(i int) {
	t := c.t
	t.Helper()
	c.signal(i, syscall.SIGSTOP)
	path := fmt.Sprintf("/proc/%d/stat", c.run(i).cmd.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name, which is in parentheses.
		if j := strings.LastIndexByte(string(data), ')'); j >= 0 && strings.HasPrefix(string(data[j+1:]), " T") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d was not stopped within 5s after SIGSTOP: %s", i, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// output is every line run r wrote so far.
func (c *leaseCluster) output(r *leaseRun) []inputtest.Got {
	c.t.Helper()
	return readOutput(c.t, r.out)
}

// outputs is every line every run wrote so far.
func (c *leaseCluster) outputs() []inputtest.Got {
	c.t.Helper()
	var all []inputtest.Got
	for _, r := range c.runs() {
		all = append(all, c.output(r)...)
	}
	return all
}

// waitLines waits until the current run of process i has written at least n
// lines.
func (c *leaseCluster) waitLines(i, n int, within time.Duration) {
	c.t.Helper()
	r := c.run(i)
	deadline := time.Now().Add(within)
	for memCountLines(c.t, r.out) < n {
		c.checkAlive()
		if time.Now().After(deadline) {
			c.t.Fatalf("%s wrote %d of %d lines within %v", r.name, memCountLines(c.t, r.out), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAll waits until the outputs together hold every record of want.
func (c *leaseCluster) waitAll(want inputtest.Produced, within time.Duration) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		seen := map[string]bool{}
		for _, m := range c.outputs() {
			seen[m.Data] = true
		}
		n := 0
		for d := range want {
			if seen[d] {
				n++
			}
		}
		if n == len(want) {
			return
		}
		c.checkAlive()
		if time.Now().After(deadline) {
			var missing []string
			for d := range want {
				if !seen[d] {
					missing = append(missing, d)
				}
			}
			slices.Sort(missing)
			t.Fatalf("only %d of %d records arrived within %v, missing e.g. %v; table:\n%s",
				n, len(want), within, inputtest.Head(missing), c.scan())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dumpLogs logs the end of every run's log.
func (c *leaseCluster) dumpLogs() {
	const keep = 16 << 10
	for _, r := range c.runs() {
		data, _ := os.ReadFile(r.log)
		cut := ""
		if len(data) > keep {
			data, cut = data[len(data)-keep:], " (last 16 KiB)"
		}
		state := "running"
		if r.exited() {
			state = fmt.Sprintf("exited: %v", r.err)
		}
		c.t.Logf("log of %s (%s)%s:\n%s", r.name, state, cut, data)
	}
}

// leaseItem is one item of the lease table, as far as the tests know its
// layout.
type leaseItem struct {
	key  string // leaseKey
	kind string // shard, stream or worker
	// Shard items.
	streamARN, shardID string
	owner              string // leaseOwner; "" when free
	counter            int64  // leaseCounter
	hasCounter         bool
	checkpoint         string // "" before the first acknowledgement
	sub                int64  // checkpointSubSequenceNumber
	parents            []string
	// bad lists attributes of the wrong type.
	bad []string
}

// leaseTable is a scan of the whole table.
type leaseTable struct {
	at     time.Time            // when the scan returned
	items  []leaseItem          // every item
	shards map[string]leaseItem // the shard items of stream orders, by shard id
}

// scan reads the whole table (every page, consistent reads). A table not
// created yet scans empty.
func (c *leaseCluster) scan() leaseTable {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tab := leaseTable{shards: map[string]leaseItem{}}
	pages := dynamodb.NewScanPaginator(c.db, &dynamodb.ScanInput{TableName: aws.String(leaseTableName), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		var notFound *types.ResourceNotFoundException
		if errors.As(err, &notFound) {
			break
		}
		if err != nil {
			t.Fatalf("scanning the lease table: %v", err)
		}
		for _, av := range page.Items {
			it := parseLeaseItem(av)
			tab.items = append(tab.items, it)
			if it.kind == "shard" && it.streamARN == c.arn {
				tab.shards[it.shardID] = it
			}
		}
	}
	tab.at = time.Now()
	return tab
}

func parseLeaseItem(av map[string]types.AttributeValue) leaseItem {
	var it leaseItem
	str := func(name string) string {
		switch v := av[name].(type) {
		case nil:
		case *types.AttributeValueMemberS:
			return v.Value
		default:
			it.bad = append(it.bad, fmt.Sprintf("%s is %T, want a string", name, v))
		}
		return ""
	}
	num := func(name string) (int64, bool) {
		switch v := av[name].(type) {
		case nil:
		case *types.AttributeValueMemberN:
			n, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				it.bad = append(it.bad, fmt.Sprintf("%s is %q, want an integer", name, v.Value))
			}
			return n, err == nil
		default:
			it.bad = append(it.bad, fmt.Sprintf("%s is %T, want a number", name, v))
		}
		return 0, false
	}
	it.key, it.kind = str("leaseKey"), str("kind")
	it.streamARN, it.shardID, it.owner = str("streamArn"), str("shardId"), str("leaseOwner")
	it.counter, it.hasCounter = num("leaseCounter")
	it.checkpoint = str("checkpoint")
	it.sub, _ = num("checkpointSubSequenceNumber")
	switch v := av["parentShardId"].(type) {
	case nil:
	case *types.AttributeValueMemberSS:
		it.parents = v.Value
	default:
		it.bad = append(it.bad, fmt.Sprintf("parentShardId is %T, want a string set", v))
	}
	return it
}

func (it leaseItem) String() string {
	if it.kind != "shard" {
		return fmt.Sprintf("%s %s owner %s", cmp.Or(it.kind, "(no kind)"), it.key, cmp.Or(it.owner, "-"))
	}
	owner := cmp.Or(it.owner, "-")
	cp := cmp.Or(it.checkpoint, "-")
	if it.sub != 0 {
		cp += "/" + strconv.FormatInt(it.sub, 10)
	}
	s := fmt.Sprintf("%s owner %s counter %d checkpoint %s", it.shardID, owner, it.counter, cp)
	if len(it.bad) > 0 {
		s += " BAD: " + strings.Join(it.bad, "; ")
	}
	return s
}

// String lists the shard items by shard id, then the other items.
func (tab leaseTable) String() string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(tab.shards)) {
		fmt.Fprintf(&b, "  %s\n", tab.shards[id])
	}
	for _, it := range tab.items {
		if it.kind != "shard" || tab.shards[it.shardID].key != it.key {
			fmt.Fprintf(&b, "  %s\n", it)
		}
	}
	return b.String()
}

// held counts the shards each owner holds.
func (tab leaseTable) held() map[string]int {
	n := map[string]int{}
	for _, it := range tab.shards {
		if it.owner != "" {
			n[it.owner]++
		}
	}
	return n
}

// ownedBy is the sorted shard ids owner holds.
func (tab leaseTable) ownedBy(owner string) []string {
	var ids []string
	for id, it := range tab.shards {
		if it.owner == owner {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// workers is the sorted leaseOwner of the worker items of stream orders.
func (tab leaseTable) workers(streamARN string) []string {
	var ids []string
	for _, it := range tab.items {
		if it.kind == "worker" && it.streamARN == streamARN {
			ids = append(ids, it.owner)
		}
	}
	slices.Sort(ids)
	return ids
}

// lostBy is for a process just killed or stopped: first is a scan of the
// table now, lost the shards owner holds in it or in a scan 300 ms later. A
// write the process sent just before it died, a take among them, may land
// after the first scan; a takeover cannot, as it waits for the lease to
// expire.
func (c *leaseCluster) lostBy(owner string) (first leaseTable, lost []string) {
	c.t.Helper()
	first = c.scan()
	time.Sleep(300 * time.Millisecond)
	lost = append(first.ownedBy(owner), c.scan().ownedBy(owner)...)
	slices.Sort(lost)
	return first, slices.Compact(lost)
}

// count is the number of items of a kind.
func (tab leaseTable) count(kind string) int {
	n := 0
	for _, it := range tab.items {
		if it.kind == kind {
			n++
		}
	}
	return n
}

// spread reports whether the table has an item for each of n shards, each
// with an owner among ids, and each of ids holds between lo and hi shards.
func (tab leaseTable) spread(n int, ids []string, lo, hi int) bool {
	if len(tab.shards) != n {
		return false
	}
	held := tab.held()
	total := 0
	for _, id := range ids {
		if held[id] < lo || held[id] > hi {
			return false
		}
		total += held[id]
	}
	return total == n // every shard owned, by ids only
}

// spreadAll is spread with every process holding at least one shard.
func (c *leaseCluster) spreadAll(tab leaseTable) bool {
	return tab.spread(len(c.shardIDs()), c.ids(), 1, len(c.shardIDs()))
}

// waitSpread waits, as the start of a test, until every shard is owned and
// each process holds one or more, within 5 lease periods of from: a bound
// looser than the one TestLeasesSpreadExactlyOnce asserts, so that a slow
// spread fails that test only.
func (c *leaseCluster) waitSpread(from time.Time) leaseTable {
	c.t.Helper()
	return c.waitTable(from.Add(5*c.period), "every shard owned, each process holding one or more", c.spreadAll)
}

// shardIDs is the shards of stream orders in the fake.
func (c *leaseCluster) shardIDs() []string {
	shards, err := c.srv.Shards(leaseStream)
	if err != nil {
		c.t.Fatal(err)
	}
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = *s.ShardId
	}
	return ids
}

// waitTable scans the table every 100 ms until cond holds and returns that
// scan; at deadline it fails the test with what, the last scan and the
// processes' logs.
func (c *leaseCluster) waitTable(deadline time.Time, what string, cond func(leaseTable) bool) leaseTable {
	c.t.Helper()
	for {
		tab := c.scan()
		if cond(tab) {
			return tab
		}
		c.checkAlive()
		if tab.at.After(deadline) {
			c.t.Fatalf("not %s by the deadline (%v ago); the table:\n%s", what, time.Since(deadline).Round(time.Millisecond), tab)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkpointOf is the shard's checkpoint as inputtest.AfterCheckpoint reads
// it: no position before the first acknowledgement; a finished shard is
// Ended.
func (it leaseItem) checkpointOf() checkpoint.Checkpoint {
	switch it.checkpoint {
	case "":
		return checkpoint.Checkpoint{}
	case leaseShardEnd:
		return checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: leaseShardEnd}, Ended: true}
	}
	return checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: it.checkpoint, SubSequence: it.sub}}
}

// checkpoints is the table's checkpoints of stream orders.
func (tab leaseTable) checkpoints() checkpoint.Stream {
	s := checkpoint.Stream{Shards: map[string]checkpoint.Checkpoint{}}
	for id, it := range tab.shards {
		s.Shards[id] = it.checkpointOf()
	}
	return s
}

// compareCheckpoints orders the checkpoints of two items of one shard:
// none < a sequence number (then sub-sequence) < SHARD_END.
func compareCheckpoints(a, b leaseItem) int {
	rank := func(it leaseItem) int {
		switch it.checkpoint {
		case "":
			return 0
		case leaseShardEnd:
			return 2
		}
		return 1
	}
	if ra, rb := rank(a), rank(b); ra != rb || ra != 1 {
		return ra - rb
	}
	pa, pb := *a.checkpointOf().Position, *b.checkpointOf().Position
	switch {
	case pa.Less(pb):
		return -1
	case pb.Less(pa):
		return 1
	}
	return 0
}

// checkLayout asserts the layout the lease tests assume: an item for each
// shard of the fake with leaseKey "<streamARN>:<shardId>" and a leaseCounter,
// and every attribute the tests read of the type they read.
func (c *leaseCluster) checkLayout(tab leaseTable) {
	t := c.t
	t.Helper()
	for _, it := range tab.items {
		if len(it.bad) > 0 {
			t.Errorf("item %s: %s", it.key, strings.Join(it.bad, "; "))
		}
	}
	for _, id := range c.shardIDs() {
		it, ok := tab.shards[id]
		switch {
		case !ok:
			t.Errorf("no shard item for %s (kind shard, streamArn %s); the table:\n%s", id, c.arn, tab)
		case it.key != c.arn+":"+id:
			t.Errorf("the shard item of %s has leaseKey %q, want %q", id, it.key, c.arn+":"+id)
		case !it.hasCounter:
			t.Errorf("the shard item of %s has no numeric leaseCounter", id)
		}
	}
	if len(tab.shards) != len(c.shardIDs()) {
		t.Errorf("%d shard items for a stream of %d shards", len(tab.shards), len(c.shardIDs()))
	}
}

// delivery is one line of a run's output.
type delivery struct {
	inputtest.Got
	run  string // the run's name
	line int    // from 1
}

func (d delivery) String() string {
	return fmt.Sprintf("%s line %d (shard %s seq %s)", d.run, d.line, d.Shard, d.Seq)
}

// deliveries is every line of every run's output, by record data.
func (c *leaseCluster) deliveries() map[string][]delivery {
	c.t.Helper()
	out := map[string][]delivery{}
	for _, r := range c.runs() {
		for i, m := range c.output(r) {
			out[m.Data] = append(out[m.Data], delivery{Got: m, run: r.name, line: i + 1})
		}
	}
	return out
}

// checkExactlyOnce asserts that the outputs together hold every record of
// want exactly once, naming where the copies of repeated records are.
func (c *leaseCluster) checkExactlyOnce(want inputtest.Produced) {
	t := c.t
	t.Helper()
	inputtest.CheckDelivery(t, c.outputs(), want, false)
	var repeated []string
	for data, ds := range c.deliveries() {
		if len(ds) > 1 {
			repeated = append(repeated, fmt.Sprintf("%s at %v", data, ds))
		}
	}
	if len(repeated) > 0 {
		slices.Sort(repeated)
		t.Fatalf("%d of %d records delivered more than once, e.g.\n  %s", len(repeated), len(want), strings.Join(inputtest.Head(repeated), "\n  "))
	}
}

// checkDuplicates asserts that every record delivered more than once is
// explained: explain returns "" for a copy it accepts, or why it does not.
// It returns the number of deliveries of repeated records.
func (c *leaseCluster) checkDuplicates(explain func(m inputtest.Got) string) int {
	t := c.t
	t.Helper()
	dups := 0
	for data, ds := range c.deliveries() {
		if len(ds) < 2 {
			continue
		}
		dups += len(ds)
		for _, d := range ds {
			if why := explain(d.Got); why != "" {
				t.Fatalf("record %s was delivered %d times, at %v: %s", data, len(ds), ds, why)
			}
		}
	}
	return dups
}

// leaseProducer writes records to stream orders of the fake, round robin
// over its shards (by explicit hash key): record n goes to shard s = n mod
// shards as its i = n / shards-th, with data "o-<s>-<i>" and partition key
// "key-<s>-<i mod 4>", so data order is sequence order within a shard and
// within a key.
type leaseProducer struct {
	t        *testing.T
	srv      *kinesisfake.Server
	hashKeys []string // the first hash key of each shard

	mu    sync.Mutex
	n     int
	want  inputtest.Produced
	putAt map[string]time.Time // when the put of a record started
	err   error

	started  bool // start was called; only the test's goroutine uses it
	done     chan struct{}
	finished chan struct{}
	stopOnce sync.Once
}

func (c *leaseCluster) producer() *leaseProducer {
	shards, err := c.srv.Shards(leaseStream)
	if err != nil {
		c.t.Fatal(err)
	}
	p := &leaseProducer{t: c.t, srv: c.srv, want: inputtest.Produced{}, putAt: map[string]time.Time{},
		done: make(chan struct{}), finished: make(chan struct{})}
	for _, s := range shards {
		p.hashKeys = append(p.hashKeys, *s.HashKeyRange.StartingHashKey)
	}
	c.t.Cleanup(p.halt)
	return p
}

// put writes n records now.
func (p *leaseProducer) put(n int) {
	p.t.Helper()
	for range n {
		if err := p.putOne(); err != nil {
			p.t.Fatalf("producing: %v", err)
		}
	}
}

func (p *leaseProducer) putOne() error {
	p.mu.Lock()
	s, i := p.n%len(p.hashKeys), p.n/len(p.hashKeys)
	p.mu.Unlock()
	return p.put1(s, fmt.Sprintf("o-%02d-%07d", s, i), fmt.Sprintf("key-%02d-%d", s, i%4))
}

// put1 writes one record to shard s and records it.
func (p *leaseProducer) put1(s int, data, pk string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	at := time.Now()
	if _, _, err := p.srv.PutWithHashKey(leaseStream, p.hashKeys[s], pk, []byte(data)); err != nil {
		p.err = err
		return err
	}
	p.n++
	p.want[data], p.putAt[data] = pk, at
	return nil
}

// start writes rate records per second in the background until stop.
func (p *leaseProducer) start(rate int) {
	p.started = true
	go func() {
		defer close(p.finished)
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for written := 0; ; {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			for target := int(time.Since(start).Seconds() * float64(rate)); written < target; written++ {
				if p.putOne() != nil {
					return
				}
			}
		}
	}()
}

// startRated writes, every 100 ms in the background until stop, perTick(s)
// records to each shard s of the first shards: record i of shard s has
// data "o-<s>-<i>-" padded to 256 bytes and partition key
// "key-<s>-<i mod 4>", so that the shards' loads are as perTick says.
func (p *leaseProducer) startRated(shards int, perTick func(shard int) int) {
	p.started = true
	next := make([]int, shards)
	go func() {
		defer close(p.finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			for s := range shards {
				for range perTick(s) {
					if p.putTo(s, next[s]) != nil {
						return
					}
					next[s]++
				}
			}
		}
	}()
}

// putTo writes record i of shard s (see startRated).
func (p *leaseProducer) putTo(s, i int) error {
	data := fmt.Sprintf("o-%02d-%07d-", s, i)
	return p.put1(s, data+strings.Repeat("x", 256-len(data)), fmt.Sprintf("key-%02d-%d", s, i%4))
}

// count is the number of records written so far.
func (p *leaseProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// waitCount waits until at least n records have been written.
func (p *leaseProducer) waitCount(n int, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for p.count() < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("%d of %d records produced within %v", p.count(), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// halt ends background production, if any, and waits for it.
func (p *leaseProducer) halt() {
	p.stopOnce.Do(func() { close(p.done) })
	if p.started {
		<-p.finished
	}
}

// stop ends production and returns every record written.
func (p *leaseProducer) stop() inputtest.Produced {
	p.t.Helper()
	p.halt()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		p.t.Fatalf("producing: %v", p.err)
	}
	return p.want
}

// startedAt is when the put of record data started: the record cannot have
// been read before.
func (p *leaseProducer) startedAt(data string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.putAt[data]
}

// checkMonotonic asserts that between two scans no shard item of stream
// orders disappeared, and none had its leaseCounter decrease or its
// checkpoint move backwards.
func checkMonotonic(t *testing.T, prev, next leaseTable) {
	t.Helper()
	for id, p := range prev.shards {
		n, ok := next.shards[id]
		switch {
		case !ok:
			t.Fatalf("the shard item of %s disappeared; before:\n%s\nafter:\n%s", id, prev, next)
		case n.counter < p.counter:
			t.Fatalf("the leaseCounter of %s went down from %d (owner %s) to %d (owner %s)", id, p.counter, p.owner, n.counter, n.owner)
		case compareCheckpoints(n, p) < 0:
			t.Fatalf("the checkpoint of %s moved backwards: %s, then %s", id, p, n)
		}
	}
}

// checkExactlyOnceInOrder is checkExactlyOnce, and each run's output keeps
// the order of shards and partition keys; it logs how many records each run
// wrote.
func (c *leaseCluster) checkExactlyOnceInOrder(want inputtest.Produced) {
	c.t.Helper()
	c.checkExactlyOnce(want)
	var counts []string
	for _, r := range c.runs() {
		got := c.output(r)
		inputtest.CheckOrder(c.t, got)
		counts = append(counts, fmt.Sprintf("%s %d", r.name, len(got)))
	}
	c.t.Logf("all %d records exactly once: %s", len(want), strings.Join(counts, ", "))
}

// startFlowing starts a cluster of o with 500 records written before its
// processes start and 300 a second after, and waits until the shards are
// spread.
func startFlowing(t *testing.T, o leaseOpts) (*leaseCluster, *leaseProducer) {
	t.Helper()
	c := newLeaseCluster(t, o)
	prod := c.producer()
	prod.put(500)
	c.startAll()
	start := time.Now()
	prod.start(300)
	c.waitSpread(start)
	return c, prod
}

// disrupt waits until process i has output 300 records, then does act to it
// (what names it), and returns when, the table at that moment, and the
// shards it owned; it fails the test when it owned none.
func (c *leaseCluster) disrupt(i int, what string, act func(int)) (at time.Time, table leaseTable, lost []string) {
	c.t.Helper()
	c.waitLines(i, 300, 20*time.Second)
	at = time.Now()
	act(i)
	table, lost = c.lostBy(c.id(i))
	if len(lost) == 0 {
		c.t.Fatalf("%s owned no shard at the %s; the table:\n%s", c.id(i), what, table)
	}
	return at, table, lost
}

// stampedLines writes each line it is given after the time it arrived, to
// the millisecond (Benthos stamps its lines to the second): the logs of a
// failed run then tell the order of what several processes did. exec's one
// copying goroutine calls Write, as Stdout and Stderr are this one value.
type stampedLines struct {
	w     io.Writer
	start bool // the next byte starts a line
}

func (s *stampedLines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.start {
			if _, err := io.WriteString(s.w, time.Now().UTC().Format("15:04:05.000 ")); err != nil {
				return 0, err
			}
			s.start = false
		}
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, s.start = p[:i+1], true
		}
		if _, err := s.w.Write(line); err != nil {
			return 0, err
		}
		p = p[len(line):]
	}
	return n, nil
}
