package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
)

// The multi-process tests of the DynamoDB lease table: 3 processes of the
// binary share the shards of one stream of the fake Kinesis through a table
// in dynalite, with lease_period 2s (see leaseCluster). They judge by the
// table (scanned whole, consistent reads) and the processes' outputs.

const (
	// leaseInFlightAllowance is how long after a SIGSTOP a record may have
	// been put and still be read by the stopped process: a GetRecords sent
	// just before the stop is answered into its socket while it is stopped.
	leaseInFlightAllowance = 500 * time.Millisecond
)

// TestLeasesSpreadExactlyOnce runs 3 processes on a stream of 16 shards,
// with 2,000 records written before they start and more at 200/s while they
// run. Within 3 lease periods of the start (all 3 processes started) every
// shard item has an owner and the owners are the 3 processes with 5 or 6
// shards each; the table has the layout the tests assume (checkLayout), one
// worker item per process and one stream item; the spread still holds once
// every record is out. Every record arrives exactly once over the 3 outputs
// (handing a shard from one process to another while balancing loses and
// repeats nothing), and each output keeps the order of each shard and of each
// partition key. All 3 stop cleanly on SIGTERM.
func TestLeasesSpreadExactlyOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs 3 processes of the binary with dynalite")
	}
	const shards = 16
	c := newLeaseCluster(t, leaseOpts{shards: shards, procs: 3})
	prod := c.producer()
	prod.put(2000)
	c.startAll()
	start := time.Now()
	prod.start(200)

	balanced := func(tab leaseTable) bool { return tab.spread(shards, c.ids(), 5, 6) }
	tab := c.waitTable(start.Add(3*leasePeriod), "every shard owned by one of the 3 processes, 5 or 6 each", balanced)
	t.Logf("balanced %v after the start: %v", tab.at.Sub(start).Round(100*time.Millisecond), tab.held())
	c.checkLayout(tab)
	c.waitTable(time.Now().Add(leasePeriod), "one worker item per process and one stream item", func(tab leaseTable) bool {
		return slices.Equal(tab.workers(c.arn), c.ids()) && tab.count("worker") == 3 && tab.count("stream") == 1
	})

	prod.waitCount(3000, 20*time.Second) // 1,000 written while they run
	want := prod.stop()
	c.waitAll(want, leaseDrainWithin)
	if tab := c.scan(); !balanced(tab) {
		t.Errorf("the spread did not last: once every record was out the table is\n%s", tab)
	}
	c.termAll()

	c.checkExactlyOnceInOrder(want)
}

// TestLeasesSIGKILLTakeover kills one of 3 processes with SIGKILL while
// records flow at 300/s over 16 shards. The table read right after the kill
// gives the shards the killed process owned (with any it is named owner of
// 300 ms later: a take it sent just before it died) and their checkpoints.
// Each of those shards has another owner within 1.5 lease periods of the
// kill (the killed process's last heartbeat was sent at most a third of a
// lease period before it; the others count its leases expired a lease
// period after they saw it, and look when they expire), measured by
// scanning the table every 100 ms (the times are logged). Once production stops every record arrives,
// and every record delivered more than once is of a shard the killed process
// owned, lies after that shard's checkpoint at the kill, and was output by the
// killed process: only what it had output but not checkpointed is repeated.
// The 2 survivors stop cleanly on SIGTERM.
func TestLeasesSIGKILLTakeover(t *testing.T) {
	t.Parallel()
	for _, period := range []time.Duration{leasePeriod, 10 * time.Second} {
		t.Run("lease_period="+period.String(), func(t *testing.T) {
			t.Parallel()
			testSIGKILLTakeover(t, period)
		})
	}
}

func testSIGKILLTakeover(t *testing.T, leasePeriod time.Duration) {
	if testing.Short() {
		t.Skip("runs 3 processes of the binary with dynalite")
	}
	c, prod := startFlowing(t, leaseOpts{shards: 16, procs: 3, period: leasePeriod})

	const victim = 1
	victimID := c.id(victim)
	killAt, atKill, lost := c.disrupt(victim, "kill", c.kill)
	cps := atKill.checkpoints()

	bound := leasePeriod * 3 / 2
	took := map[string]time.Duration{}
	deadline := killAt.Add(bound + 2*leasePeriod) // measure past the bound, to report how late
	for len(took) < len(lost) {
		tab := c.scan()
		for _, id := range lost {
			if o := tab.shards[id].owner; o != "" && o != victimID {
				if _, ok := took[id]; !ok {
					took[id] = tab.at.Sub(killAt)
				}
			}
		}
		if tab.at.After(deadline) {
			break
		}
		// Each take is counted at the end of the first scan that shows
		// it: scanned often, so that the figure is the takeover's, not
		// the polling's.
		time.Sleep(20 * time.Millisecond)
	}
	var times []string
	for _, id := range lost {
		d, ok := took[id]
		if !ok {
			times = append(times, fmt.Sprintf("%s: not taken", id))
			t.Errorf("shard %s of the killed process had no other owner %v after the kill, want within %v", id, deadline.Sub(killAt), bound)
			continue
		}
		times = append(times, fmt.Sprintf("%s: %v", id, d.Round(10*time.Millisecond)))
		if d > bound {
			t.Errorf("shard %s of the killed process was taken %v after the kill, want within %v (1.5 lease periods)", id, d, bound)
		}
	}
	t.Logf("lease_period %v; takeover of the %d shards of %s after SIGKILL: %s", leasePeriod, len(lost), victimID, strings.Join(times, ", "))
	if t.Failed() {
		t.FailNow()
	}

	want := prod.stop()
	c.waitAll(want, leaseDrainWithin)
	c.termAll()

	inputtest.CheckDelivery(t, c.outputs(), want, false)
	killedOut := map[string]bool{}
	for _, m := range c.output(c.procs[victim][0]) {
		killedOut[m.Data] = true
	}
	dups := c.checkDuplicates(func(m inputtest.Got) string {
		switch {
		case !slices.Contains(lost, m.Shard):
			return "its shard was not the killed process's"
		case !inputtest.AfterCheckpoint(m, cps):
			return fmt.Sprintf("it is at or before the shard's checkpoint at the kill (%s)", atKill.shards[m.Shard])
		case !killedOut[m.Data]:
			return "the killed process had not output it"
		}
		return ""
	})
	for _, r := range c.runs() {
		inputtest.CheckOrder(t, c.output(r))
	}
	t.Logf("all %d records arrived; %d deliveries of repeated records, all output by the killed process after its checkpoints", len(want), dups)
}

// TestLeasesRollingRestart restarts 3 processes one at a time while records
// flow at 300/s over 16 shards. Process i gets SIGTERM and exits with status
// 0 having released every lease and removed its worker item (no item names
// it). Process 0 is started again at once, so the leases it freed are taken
// by whoever comes first; processes 1 and 2 only once the 2 others own every
// shard, so the restarted one gets its shards by taking them from running
// processes. Each is started with the same config and instance id and a new
// output file, and the next one is stopped only once the shards are spread
// again (every shard owned, each process holding one or more; within 5 lease
// periods of the restart) and the restarted process has output records. Once
// production stops every record arrives exactly once over the 6 outputs, each
// keeping the order of each shard and partition key: clean stops and the
// handovers they cause lose and repeat nothing.
func TestLeasesRollingRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs 3 processes of the binary with dynalite")
	}
	const shards = 16
	c, prod := startFlowing(t, leaseOpts{shards: shards, procs: 3})

	for i := range c.procs {
		id := c.id(i)
		stopAt := time.Now()
		c.term(i)
		stopped := time.Since(stopAt)
		tab := c.scan()
		if held := tab.ownedBy(id); len(held) > 0 {
			t.Errorf("after its clean stop %s still owns %v", id, held)
		}
		if slices.Contains(tab.workers(c.arn), id) {
			t.Errorf("after its clean stop %s still has its worker item", id)
		}
		var others []string
		for _, o := range c.ids() {
			if o != id {
				others = append(others, o)
			}
		}
		down := time.Duration(0)
		if i > 0 {
			tab = c.waitTable(time.Now().Add(5*leasePeriod), fmt.Sprintf("every shard owned by %v while %s is down", others, id),
				func(tab leaseTable) bool { return tab.spread(shards, others, 1, shards) })
			down = time.Since(stopAt)
		}
		restartAt := time.Now()
		c.start(i)
		tab = c.waitTable(restartAt.Add(5*leasePeriod), fmt.Sprintf("every shard owned and each process holding one or more after the restart of %s", id), c.spreadAll)
		spreadAfter := tab.at.Sub(restartAt)
		c.waitLines(i, 20, 5*leasePeriod)
		t.Logf("%s stopped in %v, restarted after %v; spread again %v after its restart: %v",
			id, stopped.Round(10*time.Millisecond), down.Round(10*time.Millisecond), spreadAfter.Round(100*time.Millisecond), tab.held())
	}

	want := prod.stop()
	c.waitAll(want, leaseDrainWithin)
	c.termAll()

	c.checkExactlyOnceInOrder(want)
}

// TestLeasesSIGSTOPFenced freezes one of 3 processes with SIGSTOP for 3.5
// lease periods while records flow at 300/s over 16 shards, then wakes it
// with SIGCONT. It asserts:
//
//   - while it is stopped, every shard it owned at the stop gets another
//     owner (checked on the last scan before the wake);
//   - from the stop until 2 lease periods after the wake (scans every
//     100 ms) no shard item disappears, no leaseCounter decreases and no
//     checkpoint moves backwards: the woken process writes none of its stale
//     checkpoints;
//   - after the wake, a shard item owned by the woken process has a
//     leaseCounter above the one it had on the last scan before the wake: it
//     can only have taken the lease anew, not written its old one back;
//   - every record arrives, and every record delivered more than once is of
//     a shard the stopped process owned at the stop, lies after that shard's
//     checkpoint in the table at the stop, was output by the stopped process
//     (before the stop, or after the wake if it was in its pipeline), and was
//     put no later than 500 ms after the stop (leaseInFlightAllowance): the
//     stopped process could have read it before it froze. A record it output
//     that was put later was read after the wake from a shard it had lost;
//   - all 3 processes, the woken one too, stop cleanly on SIGTERM.
func TestLeasesSIGSTOPFenced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs 3 processes of the binary with dynalite")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the state of the stopped process from /proc")
	}
	c, prod := startFlowing(t, leaseOpts{shards: 16, procs: 3})

	const sleeper = 1
	sleeperID := c.id(sleeper)
	stopAt, atStop, lost := c.disrupt(sleeper, "stop", c.freeze)
	cps := atStop.checkpoints()
	linesAtStop := memCountLines(t, c.run(sleeper).out)

	wakeAt := stopAt.Add(3*leasePeriod + leasePeriod/2)
	prev, takenAfter := atStop, time.Duration(0)
	for time.Now().Before(wakeAt) {
		time.Sleep(100 * time.Millisecond)
		tab := c.scan()
		checkMonotonic(t, prev, tab)
		prev = tab
		if takenAfter == 0 && !slices.ContainsFunc(lost, func(id string) bool {
			o := tab.shards[id].owner
			return o == "" || o == sleeperID
		}) {
			takenAfter = tab.at.Sub(stopAt)
		}
	}
	beforeWake := prev
	for _, id := range lost {
		if o := beforeWake.shards[id].owner; o == "" || o == sleeperID {
			t.Fatalf("shard %s of the stopped process has owner %q %v after the stop; the table:\n%s",
				id, o, beforeWake.at.Sub(stopAt).Round(time.Millisecond), beforeWake)
		}
	}
	if held := beforeWake.ownedBy(sleeperID); len(held) > 0 {
		t.Fatalf("the stopped process owns %v, which it did not own at the stop", held)
	}
	t.Logf("the %d shards of %s were all taken %v after SIGSTOP", len(lost), sleeperID, takenAfter.Round(10*time.Millisecond))

	wokeAt := time.Now()
	c.signal(sleeper, syscall.SIGCONT)
	for time.Since(wokeAt) < 2*leasePeriod {
		time.Sleep(100 * time.Millisecond)
		tab := c.scan()
		checkMonotonic(t, prev, tab)
		prev = tab
		for id, it := range tab.shards {
			if it.owner == sleeperID && it.counter <= beforeWake.shards[id].counter {
				t.Fatalf("%v after the wake %s owns %s with leaseCounter %d, not above %d before the wake (%s): it wrote a lease it had lost",
					tab.at.Sub(wokeAt).Round(time.Millisecond), sleeperID, id, it.counter, beforeWake.shards[id].counter, beforeWake.shards[id])
			}
		}
	}
	t.Logf("2 lease periods after the wake: %v", prev.held())

	want := prod.stop()
	c.waitAll(want, leaseDrainWithin)
	c.termAll()

	inputtest.CheckDelivery(t, c.outputs(), want, false)
	sleeperRun := c.procs[sleeper][0]
	sleeperGot := c.output(sleeperRun)
	sleeperOut := map[string]bool{}
	for _, m := range sleeperGot {
		sleeperOut[m.Data] = true
	}
	readBy := stopAt.Add(leaseInFlightAllowance)
	dups := c.checkDuplicates(func(m inputtest.Got) string {
		switch {
		case !slices.Contains(lost, m.Shard):
			return "its shard was not the stopped process's"
		case !inputtest.AfterCheckpoint(m, cps):
			return fmt.Sprintf("it is at or before the shard's checkpoint at the stop (%s)", atStop.shards[m.Shard])
		case !sleeperOut[m.Data]:
			return "the stopped process did not output it"
		case prod.startedAt(m.Data).After(readBy):
			return fmt.Sprintf("it was put %v after the stop: the stopped process read it after the wake, from a shard it had lost",
				prod.startedAt(m.Data).Sub(stopAt).Round(time.Millisecond))
		}
		return ""
	})
	for _, r := range c.runs() {
		inputtest.CheckOrder(t, c.output(r))
	}
	t.Logf("all %d records arrived; %s wrote %d lines before the stop and %d after the wake; %d deliveries of repeated records, all read by it before the stop and not checkpointed",
		len(want), sleeperID, linesAtStop, len(sleeperGot)-linesAtStop, dups)
}

// TestLeasesEFOOneRegistration starts 3 processes together reading a stream
// of 4 shards by Enhanced Fan-Out with consumer_name app and the default
// (lazy) registration, with 1,000 records written before and more at 100/s
// while they run. Exactly one RegisterStreamConsumer call reaches the fake
// (Server.Calls counts every request received, failed ones too), the stream
// has exactly one consumer, app, ACTIVE, and every record arrives exactly once
// over the 3 outputs, each keeping the order of each shard and partition key.
func TestLeasesEFOOneRegistration(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs 3 processes of the binary with dynalite")
	}
	c := newLeaseCluster(t, leaseOpts{shards: 4, procs: 3, efo: true})
	prod := c.producer()
	prod.put(1000)
	c.startAll()
	prod.start(100)
	prod.waitCount(1500, 20*time.Second)
	want := prod.stop()
	c.waitAll(want, leaseDrainWithin)
	t.Logf("shards held once every record was out: %v", c.scan().held())
	c.termAll()

	if n := c.srv.Calls("RegisterStreamConsumer"); n != 1 {
		t.Errorf("%d RegisterStreamConsumer calls reached Kinesis, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.srv.NewClient().ListStreamConsumers(ctx, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(c.arn)})
	if err != nil {
		t.Fatal(err)
	}
	var consumers []string
	for _, sc := range out.Consumers {
		consumers = append(consumers, fmt.Sprintf("%s %s", aws.ToString(sc.ConsumerName), sc.ConsumerStatus))
	}
	if len(consumers) != 1 || consumers[0] != "app ACTIVE" {
		t.Errorf("the stream's consumers are %v, want [app ACTIVE]", consumers)
	}

	c.checkExactlyOnce(want)
	for _, r := range c.runs() {
		inputtest.CheckOrder(t, c.output(r))
	}
	t.Logf("all %d records exactly once through one consumer registration", len(want))
}
