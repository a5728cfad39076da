package input

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// TestLatestIsPinnedWhenTheStreamIsFirstSeen: start_from latest means the
// records written after the input first saw the stream. Before the fix the
// time was taken at the first successful shard listing, so with the first
// ListShards calls throttled, the records written in between were never
// read.
func TestLatestIsPinnedWhenTheStreamIsFirstSeen(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	if _, _, err := srv.Put("orders", "k", []byte("before")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := inputtest.Produced{}
	failed := 0
	remove := srv.Control("ListShards", func(*kinesisfake.Request) (bool, int, []byte) {
		mu.Lock()
		defer mu.Unlock()
		if failed == 3 {
			return false, 0, nil
		}
		// The stream has been described: what is written now is after it.
		data := fmt.Sprintf("during-%d", failed)
		if _, _, err := srv.Put("orders", fmt.Sprint("key-", failed), []byte(data)); err != nil {
			t.Error(err)
		}
		want[data] = fmt.Sprint("key-", failed)
		failed++
		status, body := kinesisfake.ErrorBody("LimitExceededException", "Rate exceeded for stream orders.")
		return true, status, body
	})
	defer remove()

	conf := strings.Replace(fakeInput(srv, "orders", t.TempDir(), "reader: polling\nshard_discovery_interval: 1s"),
		"start_from: trim_horizon", "start_from: latest", 1)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, conf, out)
	waitUntil(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return failed == 3 })
	mu.Lock()
	n := len(want)
	mu.Unlock()
	p.StopWhen(t, out, n, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	inputtest.CheckDelivery(t, out.All(), want, true)
}

// TestRecreatedStreamWithRegistrationNone: with efo.registration none
// the input never describes the stream, so streamReader.created stays zero and
// load's "deleted and created again" check is skipped. Before the fix (a
// check of each shard's starting sequence number at discovery), a stream
// deleted and created again under the same name (and a new consumer ARN in the
// config) inherited the old stream's checkpoints: its shardId-000000000000 was
// taken for the old, ended one and never read. Silent loss.
//
// The harness builds the streamReader as prepareStream does for registration
// none (no describe, zero creation time); it reads by polling for brevity.
func TestRecreatedStreamWithRegistrationNone(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	mkPolling := func(in *kinesisInput, client *kinesis.Client) recordPublisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	}
	for i := 0; i < 3; i++ {
		if _, _, err := srv.Put("orders", "k", []byte(fmt.Sprintf("old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.SplitShard("orders", "shardId-000000000000", ""); err != nil {
		t.Fatal(err)
	}

	// First life of the stream: shard 0 is read to its end.
	store1, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := startStreamHarnessWith(t, srv, "", store1, mkPolling)
	waitUntil(t, 20*time.Second, func() bool {
		cp, _ := h.s.pos.Of("shardId-000000000000")
		return cp.Ended
	})
	h.stop(t)
	store1.Close()

	// The stream is deleted and created again, with new records.
	if err := srv.DeleteStream("orders"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, func() bool { return srv.CreateStream("orders", 1) == nil })
	for i := 0; i < 3; i++ {
		if _, _, err := srv.Put("orders", "k", []byte(fmt.Sprintf("new-%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	store2, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	h2 := startStreamHarnessWith(t, srv, "", store2, mkPolling)
	if !eventually(time.Minute, func() bool { return slices.Contains(h2.data(), "new-0") }) {
		got := h2.data()
		cp, _ := h2.s.pos.Of("shardId-000000000000")
		t.Fatalf("the recreated stream's records were never read (got %q); its shardId-000000000000 carries the old stream's checkpoint %+v", got, cp)
	}
}

// TestRecreatedWhileRunningKeepsNewCheckpoints: a stream deleted and created
// again while the input runs is read afresh; its checkpoints must then
// survive a clean restart. Before the fix, reset kept the old stream's
// creation time in the saved state, so the next start took the new stream's
// checkpoints for an older stream's and dropped them: with trim_horizon every
// acknowledged record of the new stream came again; with latest the records
// written while the input was stopped were never read.
func TestRecreatedWhileRunningKeepsNewCheckpoints(t *testing.T) {
	t.Parallel()
	polling, efo := "reader: polling", "efo: { consumer_name: app }"
	for _, c := range []struct{ name, startFrom, reader string }{
		{"polling, trim_horizon", "trim_horizon", polling},
		{"polling, latest", "latest", polling},
		{"efo, trim_horizon", "trim_horizon", efo},
		{"efo, latest", "latest", efo},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newFake(t, kinesisfake.Stream("orders", 1))
			dir := t.TempDir()
			conf := strings.Replace(fakeInput(srv, "orders", dir, c.reader+"\nshard_discovery_interval: 1s"),
				"start_from: trim_horizon", "start_from: "+c.startFrom, 1)
			arn := srv.StreamARN("orders")

			out := &inputtest.Collector{}
			p := inputtest.StartPipeline(t, conf, out)
			// With latest, records count once the start is pinned and saved.
			waitUntil(t, 20*time.Second, func() bool { return len(inputtest.ReadCheckpointsUnlocked(t, dir, arn).Shards) > 0 })
			want := fakeProduce(t, srv, "orders", "old", 5, 2)
			out.WaitFor(t, len(want), 30*time.Second)

			recreate(t, srv, "orders", 1)
			// Everything of the new stream is read, whatever start_from says:
			// all of it was written after the input first saw the name.
			newer := fakeProduce(t, srv, "orders", "new", 5, 2)
			maps.Copy(want, newer)
			p.StopWhen(t, out, len(want), 30*time.Second)
			inputtest.CheckDelivery(t, out.All(), want, true)

			// Written while the input is stopped: must be read after the restart.
			stopped := fakeProduce(t, srv, "orders", "stopped", 5, 2)
			out2 := &inputtest.Collector{}
			p2 := inputtest.StartPipeline(t, conf, out2)
			p2.StopWhen(t, out2, len(stopped), 30*time.Second)
			inputtest.CheckDelivery(t, out2.All(), stopped, true)
		})
	}
}

// TestChildrenOfTheOldStreamAreIgnored: a reader of the stream before a
// reset (deleted and created again) may report the end of its shard just
// after the reset. Before the fix its children were adopted into the new
// stream's state: pinned, and read as shards of the new stream (or, with an
// id the new stream also has, started before their time).
func TestChildrenOfTheOldStreamAreIgnored(t *testing.T) {
	t.Parallel()
	in, err := newTestInput(t, "streams: [orders]\nreader: polling\n")
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	in.coord = coord.NewLocal(store)
	s := &streamReader{in: in, name: "orders", arn: "arn:aws:kinesis:us-east-1:123456789012:stream/orders"}
	if err := s.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.running["shardId-000000000000"] = func(error) {}
	if err := s.reset(t.Context()); err != nil { // no describe: as with registration none
		t.Fatal(err)
	}
	child := shardInfo{id: "shardId-000000000001", parents: []string{"shardId-000000000000"}}
	s.readerEnded(t.Context(), shardEvent{shardID: "shardId-000000000000", epoch: 0, ended: true, children: []shardInfo{child}})
	if _, ok := s.shards[child.id]; ok {
		t.Fatal("a child reported by a reader of the old stream was adopted by the new one")
	}
	if _, ok := s.pos.Of(child.id); ok {
		t.Fatal("a child reported by a reader of the old stream was pinned in the new one's state")
	}
	if len(s.running) != 0 {
		t.Fatal("the old reader is still counted as running")
	}
	// The same event of the current state is adopted.
	s.running["shardId-000000000000"] = func(error) {}
	s.readerEnded(t.Context(), shardEvent{shardID: "shardId-000000000000", epoch: s.pos.Epoch(), ended: true, children: []shardInfo{child}})
	if _, ok := s.pos.Of(child.id); !ok {
		t.Fatal("a child reported by a current reader was not pinned")
	}
}

// TestReplaysOfTheOldStreamAfterARecreate: batches of the old stream that
// the output rejected are still replayed after the stream was deleted and
// created again (they were read and never processed: at least once holds
// for them), and their acknowledgement cannot touch the new stream's
// checkpoints.
func TestReplaysOfTheOldStreamAfterARecreate(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "reader: polling\nshard_discovery_interval: 1s")
	old := fakeProduce(t, srv, "orders", "old", 5, 1)
	out := &inputtest.Collector{}
	var rejectOld atomic.Bool
	rejectOld.Store(true)
	rejections := atomic.Int64{}
	out.Reject = func(b []inputtest.Got) bool {
		if rejectOld.Load() && strings.HasPrefix(b[0].Data, "old") {
			rejections.Add(1)
			return true
		}
		return false
	}
	p := inputtest.StartPipeline(t, conf, out)
	waitUntil(t, 30*time.Second, func() bool { return rejections.Load() >= 2 })
	recreate(t, srv, "orders", 1)
	newer := fakeProduce(t, srv, "orders", "new", 5, 1)
	out.WaitFor(t, len(newer), 30*time.Second)
	rejectOld.Store(false)
	want := maps.Clone(newer)
	maps.Copy(want, old)
	p.StopWhen(t, out, len(want), 30*time.Second)
	inputtest.CheckDelivery(t, out.All(), want, true)

	// The new stream's checkpoint is its own last record.
	cps := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))
	for _, m := range out.All() {
		if strings.HasPrefix(m.Data, "new") && inputtest.AfterCheckpoint(m, cps) {
			t.Fatalf("record %s of the new stream is after its checkpoint %+v", m.Data, cps.Shards)
		}
	}
	out2 := &inputtest.Collector{}
	more := fakeProduce(t, srv, "orders", "more", 3, 1)
	p2 := inputtest.StartPipeline(t, conf, out2)
	p2.StopWhen(t, out2, len(more), 30*time.Second)
	inputtest.CheckDelivery(t, out2.All(), more, true)
}

// TestParentCycle finds shards whose parents lead back to themselves.
func TestParentCycle(t *testing.T) {
	sh := func(id string, parents ...string) shardInfo { return shardInfo{id: id, parents: parents} }
	for _, tc := range []struct {
		name   string
		shards []shardInfo
		cycle  string
	}{
		{"a split and a merge", []shardInfo{sh("0"), sh("1", "0"), sh("2", "0"), sh("3", "1", "2")}, ""},
		{"parents gone", []shardInfo{sh("5", "1"), sh("6", "5", "4")}, ""},
		{"two", []shardInfo{sh("0", "1"), sh("1", "0")}, "0 1 0"},
		{"itself", []shardInfo{sh("7", "7")}, "7 7"},
		{"behind a good one", []shardInfo{sh("0"), sh("1", "0", "3"), sh("2", "1"), sh("3", "2")}, "1 3 2 1"},
	} {
		shards := map[string]shardInfo{}
		for _, s := range tc.shards {
			shards[s.id] = s
		}
		if got := strings.Join(parentCycle(shards), " "); got != tc.cycle {
			t.Errorf("%s: cycle %q, want %q", tc.name, got, tc.cycle)
		}
	}
}

// TestNeverListed tells a shard id that cannot be of the stream (above every
// listed one, or not a shard id) from one that may have passed retention.
func TestNeverListed(t *testing.T) {
	listed := []shardInfo{{id: "shardId-000000000003"}, {id: "shardId-000000000004"}}
	for id, want := range map[string]bool{
		"shardId-000000000001": false, // may have passed the retention period
		"shardId-000000000099": true,
		"shard-7":              true,
		"shardId-":             true,
	} {
		if got := neverListed(id, listed); got != want {
			t.Errorf("neverListed(%s) = %v, want %v", id, got, want)
		}
	}
}

// TestBadListingsAreSaid: ListShards answers that leave the stream unread
// are errors an operator sees. An empty listing drops no checkpoint, shards
// whose parents form a cycle are named, and a checkpoint of a shard id the
// stream never had is said to be not in the stream.
//
// Before, an empty listing or a cycle read nothing and logged nothing, and a
// checkpoint of a shard not in the stream was reported as older than the
// retention period.
func TestBadListingsAreSaid(t *testing.T) {
	t.Parallel()
	const full = `"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"340282366920938463463374607431768211455"}`
	for _, tc := range []struct {
		name, answer, said string
	}{
		{"empty", `{"Shards":[]}`, "ListShards lists no shards"},
		{"cycle", `{"Shards":[` +
			`{"ShardId":"shardId-000000000000","ParentShardId":"shardId-000000000001",` + full + `,"SequenceNumberRange":{"StartingSequenceNumber":"START0"}},` +
			`{"ShardId":"shardId-000000000001","ParentShardId":"shardId-000000000000",` + full + `,"SequenceNumberRange":{"StartingSequenceNumber":"2"}}]}`,
			"shardId-000000000000 -> shardId-000000000001 -> shardId-000000000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newFake(t, kinesisfake.Stream("orders", 1))
			dir := t.TempDir()
			conf := fakeInput(srv, "orders", dir, "reader: polling")
			want := fakeProduce(t, srv, "orders", "a", 5, 1)
			out := &inputtest.Collector{}
			p := inputtest.StartPipeline(t, conf, out)
			p.StopWhen(t, out, len(want), time.Minute)
			before := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))

			// Shard 0 as it starts: another start would be a stream created
			// again, which drops the checkpoints rightly.
			answer := strings.ReplaceAll(tc.answer, "START0", before.Shards["shardId-000000000000"].ShardStart)
			srv.Control("ListShards", func(*kinesisfake.Request) (bool, int, []byte) {
				return true, 200, []byte(answer)
			})
			logs := &inputtest.Logs{}
			p = inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs})
			waitUntil(t, time.Minute, func() bool { return hasLine(logs.String(), "level=ERROR", "stream orders", tc.said) })
			p.Stop(t)
			after := inputtest.ReadCheckpoints(t, dir, srv.StreamARN("orders"))
			const shard0 = "shardId-000000000000"
			if a, b := after.Shards[shard0], before.Shards[shard0]; fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("the checkpoint of %s changed under a bad listing: %v, was %v", shard0, a, b)
			}
		})
	}
	t.Run("checkpoint_of_a_shard_not_in_the_stream", func(t *testing.T) {
		t.Parallel()
		srv := newFake(t, kinesisfake.Stream("orders", 1))
		dir := t.TempDir()
		store, err := checkpoint.OpenFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Save(t.Context(), checkpoint.Stream{ARN: srv.StreamARN("orders"), Shards: map[string]checkpoint.Checkpoint{
			"shardId-000000000042": {Start: checkpoint.Start{Kind: "TRIM_HORIZON"}},
		}}); err != nil {
			t.Fatal(err)
		}
		store.Close()
		want := fakeProduce(t, srv, "orders", "a", 5, 1)
		logs := &inputtest.Logs{}
		out := &inputtest.Collector{}
		p := inputtest.StartPipelineWith(t, fakeInput(srv, "orders", dir, "reader: polling"), out.Consume, inputtest.Options{Logs: logs})
		p.StopWhen(t, out, len(want), time.Minute)
		text := logs.String()
		if !strings.Contains(text, "shardId-000000000042, which is not in the stream") || strings.Contains(text, "retention") {
			t.Errorf("the checkpoint of a shard not in the stream is not said to be so:\n%s", text)
		}
	})
}

// TestStartSaysWhichStoreAndWhatItHeld: the start names the checkpoint
// directory by its absolute path (a relative one depends on the working
// directory) and says, per stream, that no checkpoint was found and where
// reading starts, or how many shards had one.
//
// Before, nothing said which store was opened or that it was empty: a
// relative checkpoint.dir started from another working directory with
// start_from latest skipped what was written meanwhile in silence.
func TestStartSaysWhichStoreAndWhatItHeld(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	dir := t.TempDir()
	conf := fakeInput(srv, "orders", dir, "reader: polling")
	want := fakeProduce(t, srv, "orders", "a", 4, 2)
	for run, said := range []string{
		"stream orders: no checkpoint in the directory " + dir + ": its shards are read from TRIM_HORIZON",
		"stream orders: checkpoints of 2 shards found in the directory " + dir,
	} {
		logs := &inputtest.Logs{}
		out := &inputtest.Collector{}
		p := inputtest.StartPipelineWith(t, conf, out.Consume, inputtest.Options{Logs: logs})
		if run == 0 {
			p.StopWhen(t, out, len(want), time.Minute)
		} else {
			waitUntil(t, time.Minute, func() bool { return strings.Contains(logs.String(), said) })
			p.Stop(t)
		}
		text := logs.String()
		if !strings.Contains(text, said) || !strings.Contains(text, "checkpoints are kept in the directory "+dir) {
			t.Errorf("run %d does not say %q and which store it opened:\n%s", run+1, said, text)
		}
	}
}
