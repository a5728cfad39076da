package input

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestLatestIsPinnedWhenTheStreamIsFirstSeen: start_from latest means the
// records written after the input first saw the stream. Before the fix the
// time was taken at the first successful shard listing, so with the first
// ListShards calls throttled, the records written in between were never
// read.
func TestLatestIsPinnedWhenTheStreamIsFirstSeen(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
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
	inputtest.WaitUntil(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return failed == 3 })
	mu.Lock()
	n := len(want)
	mu.Unlock()
	p.StopWhen(t, out, n, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	inputtest.CheckDelivery(t, out.All(), want, true)
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
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
			dir := t.TempDir()
			conf := strings.Replace(fakeInput(srv, "orders", dir, c.reader+"\nshard_discovery_interval: 1s"),
				"start_from: trim_horizon", "start_from: "+c.startFrom, 1)
			arn := srv.StreamARN("orders")

			out := &inputtest.Collector{}
			p := inputtest.StartPipeline(t, conf, out)
			// With latest, records count once the start is pinned and saved.
			inputtest.WaitUntil(t, 20*time.Second, func() bool { return len(inputtest.ReadCheckpointsUnlocked(t, dir, arn).Shards) > 0 })
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

// TestReplaysOfTheOldStreamAfterARecreate: batches of the old stream that
// the output rejected are still replayed after the stream was deleted and
// created again (they were read and never processed: at least once holds
// for them), and their acknowledgement cannot touch the new stream's
// checkpoints.
func TestReplaysOfTheOldStreamAfterARecreate(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
	inputtest.WaitUntil(t, 30*time.Second, func() bool { return rejections.Load() >= 2 })
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
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
			inputtest.WaitUntil(t, time.Minute, func() bool { return hasLine(logs.String(), "level=ERROR", "stream orders", tc.said) })
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
		srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 1))
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
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2))
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
			inputtest.WaitUntil(t, time.Minute, func() bool { return strings.Contains(logs.String(), said) })
			p.Stop(t)
		}
		text := logs.String()
		if !strings.Contains(text, said) || !strings.Contains(text, "checkpoints are kept in the directory "+dir) {
			t.Errorf("run %d does not say %q and which store it opened:\n%s", run+1, said, text)
		}
	}
}
