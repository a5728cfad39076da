package lease

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// bothStores runs f against the DynamoDB table (dynalite) and Memory.
func bothStores(t *testing.T, name string, f func(t *testing.T, st Store)) {
	t.Run("dynalite", func(t *testing.T) {
		t.Parallel()
		f(t, open(t, emulator.Dynalite(t), name))
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, NewMemory())
	})
}

func mustPoll(t *testing.T, st Store) Poll {
	t.Helper()
	p, err := st.Poll(t.Context(), arn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// beatsOf summarizes a poll's beats: "id:nonce:counter" sorted by id.
func beatsOf(p Poll) string {
	var out []string
	for _, b := range p.Beats {
		out = append(out, fmt.Sprintf("%s:%s:%d", b.ID, b.Nonce, b.Counter))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestRosterBeats: an instance joins the roster with its first beat, its
// later beats move its entry, one held up on its way and landing after a
// later one changes nothing, another process of its name is refused unless
// it takes over, an entry is removed only as seen, and one removed is
// written anew, with another birth, by its process's next beat.
func TestRosterBeats(t *testing.T) {
	t.Parallel()
	bothStores(t, "roster", func(t *testing.T, st Store) {
		ctx := t.Context()
		if _, _, err := st.PutStream(ctx, Stream{ARN: arn, Start: startKind("TRIM_HORIZON")}); err != nil {
			t.Fatal(err)
		}
		a, err := st.Beat(ctx, arn, "a", Beat{Nonce: "na", Counter: 1, Bucket: -1}, false)
		if err != nil || a.Bucket != 0 || a.Born == "" {
			t.Fatalf("first beat: %+v, %v; want it in roster item 0 with a birth", a, err)
		}
		if got := beatsOf(mustPoll(t, st)); got != "a:na:1" {
			t.Fatalf("poll after the first beat: %q", got)
		}
		a.Counter = 3
		if a, err = st.Beat(ctx, arn, "a", a, false); err != nil || a.Counter != 3 {
			t.Fatalf("second beat: %+v, %v", a, err)
		}
		late := a
		late.Counter = 2
		if got, err := st.Beat(ctx, arn, "a", late, false); err != nil || got.Counter != 3 {
			t.Fatalf("a beat landing after a later one: %+v, %v; want the entry as it stands (counter 3)", got, err)
		}
		if got := beatsOf(mustPoll(t, st)); got != "a:na:3" {
			t.Fatalf("poll after a late beat: %q, want counter 3", got)
		}
		if _, err := st.Beat(ctx, arn, "a", Beat{Nonce: "na2", Counter: 1, Bucket: -1}, false); !errors.Is(err, ErrDuplicateInstance) {
			t.Fatalf("a beat of another process of the name: %v, want ErrDuplicateInstance", err)
		}
		if got := beatsOf(mustPoll(t, st)); got != "a:na:3" {
			t.Fatalf("a refused beat wrote: %q", got)
		}
		if _, err := st.Beat(ctx, arn, "b", Beat{Nonce: "nb", Counter: 1, Bucket: -1}, false); err != nil {
			t.Fatal(err)
		}
		stale := a
		stale.Counter = 2
		if removed, err := st.RemoveBeat(ctx, arn, stale); err != nil || removed {
			t.Fatalf("removal of an entry that moved since: %v, %v; want not removed", removed, err)
		}
		if removed, err := st.RemoveBeat(ctx, arn, a); err != nil || !removed {
			t.Fatalf("removal as seen: %v, %v; want removed", removed, err)
		}
		if got := beatsOf(mustPoll(t, st)); got != "b:nb:1" {
			t.Fatalf("poll after the removal: %q", got)
		}
		a.Counter = 4
		again, err := st.Beat(ctx, arn, "a", a, false)
		if err != nil || again.Born == a.Born || again.Bucket != a.Bucket {
			t.Fatalf("the beat after the removal: %+v, %v; want written anew in roster item %d with another birth than %s", again, err, a.Bucket, a.Born)
		}
		if removed, _ := st.RemoveBeat(ctx, arn, a); removed {
			t.Fatal("a removal of the entry seen before its removal removed the entry written anew")
		}
		// A take over replaces the entry as read, and only while it is
		// that entry: one that beat since lives (the read was answered
		// late, say).
		read, _, err := st.GetBeat(ctx, arn, again.Bucket, "a")
		if err != nil {
			t.Fatal(err)
		}
		again.Counter = 5
		if again, err = st.Beat(ctx, arn, "a", again, false); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Beat(ctx, arn, "a", Beat{Nonce: "na2", Counter: 1, Bucket: again.Bucket, Replacing: read.Value()}, true); !errors.Is(err, ErrDuplicateInstance) {
			t.Fatalf("a take over of an entry that beat since it was read: %v, want ErrDuplicateInstance", err)
		}
		if _, err := st.Beat(ctx, arn, "a", Beat{Nonce: "na2", Counter: 1, Bucket: again.Bucket}, true); !errors.Is(err, ErrDuplicateInstance) {
			t.Fatalf("a take over naming no entry, over one: %v, want ErrDuplicateInstance", err)
		}
		if _, err := st.Beat(ctx, arn, "a", Beat{Nonce: "na2", Counter: 1, Bucket: again.Bucket, Replacing: again.Value()}, true); err != nil {
			t.Fatalf("take over: %v", err)
		}
		if got := beatsOf(mustPoll(t, st)); got != "a:na2:1 b:nb:1" {
			t.Fatalf("poll after the take over: %q", got)
		}
		if _, err := st.Beat(ctx, arn, "a", again, false); !errors.Is(err, ErrDuplicateInstance) {
			t.Fatalf("a beat of the process taken over: %v, want ErrDuplicateInstance", err)
		}
		if err := st.LeaveRoster(ctx, arn, "b", 0); err != nil {
			t.Fatal(err)
		}
		if got := beatsOf(mustPoll(t, st)); got != "a:na2:1" {
			t.Fatalf("poll after b left: %q", got)
		}
		got, ok, err := st.GetBeat(ctx, arn, 0, "a")
		if err != nil || !ok || got.Nonce != "na2" {
			t.Fatalf("GetBeat: %+v, %v, %v", got, ok, err)
		}
	})
}

// TestPollShowsBeatsInOrder: a poll lists the beats by instance, not in
// the order of a map (which differs from call to call): what a
// coordinator reads after a poll, and so a replayed simulation, does not
// depend on chance.
func TestPollShowsBeatsInOrder(t *testing.T) {
	t.Parallel()
	bothStores(t, "pollorder", func(t *testing.T, st Store) {
		ctx := t.Context()
		if _, _, err := st.PutStream(ctx, Stream{ARN: arn, Start: startKind("TRIM_HORIZON")}); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, id := range []string{"k", "c", "h", "a", "l", "e", "j", "b", "g", "d", "i", "f"} {
			if _, err := st.Beat(ctx, arn, id, Beat{Nonce: "n" + id, Counter: 1, Bucket: -1}, false); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		slices.Sort(want)
		for range 5 {
			var got []string
			for _, b := range mustPoll(t, st).Beats {
				got = append(got, b.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("a poll listed the beats as %v, want %v", got, want)
			}
		}
	})
}

// TestRosterGrows: instances join the first roster item with room; once
// it is full (a beat in it costs one write unit) the next join opens
// another, which the stream's item counts and every poll reads.
func TestRosterGrows(t *testing.T) {
	t.Parallel()
	bothStores(t, "rostergrows", func(t *testing.T, st Store) {
		ctx := t.Context()
		if _, _, err := st.PutStream(ctx, Stream{ARN: arn, Start: startKind("TRIM_HORIZON")}); err != nil {
			t.Fatal(err)
		}
		const n = 40
		buckets := map[int]int{}
		for i := range n {
			id := fmt.Sprintf("instance-with-a-longish-name-%02d", i)
			b, err := st.Beat(ctx, arn, id, Beat{Nonce: fmt.Sprintf("%016x", i), Counter: 1, Bucket: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			buckets[b.Bucket]++
		}
		p := mustPoll(t, st)
		if len(p.Beats) != n {
			t.Fatalf("a poll shows %d beats of %d", len(p.Beats), n)
		}
		if len(buckets) < 2 || p.Stream.Rosters != len(buckets) {
			t.Fatalf("%d instances in roster items %v, the stream counts %d", n, buckets, p.Stream.Rosters)
		}
		for b, k := range buckets {
			if k > 12 {
				t.Errorf("roster item %d holds %d instances: a beat in it costs more than a write unit", b, k)
			}
		}
	})
}

// TestChangesAnnounced: every change of a lease's owner moves the stream's
// change counter (a take, an ask, a withdrawal, a handover, a release, an
// item deleted or set by the checkpoint command, items created once their
// creator announces them: a few by name, many as the stream's change); a
// holder's checkpoint does not, and a stream's item written again keeps
// the count.
func TestChangesAnnounced(t *testing.T) {
	t.Parallel()
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	bothStores(t, "changes", func(t *testing.T, st Store) {
		ctx := t.Context()
		if _, _, err := st.PutStream(ctx, Stream{ARN: arn, Start: startKind("TRIM_HORIZON")}); err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		// named is the shard the log names for a change, "" for none (the
		// readers scan).
		named := func(what, want string, do func() error) {
			t.Helper()
			if err := do(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			p := mustPoll(t, st).Stream
			if p.Changes != last+1 {
				t.Fatalf("%s: the change counter went from %d to %d, want moved by one", what, last, p.Changes)
			}
			got, ok := p.ChangedSince(last)
			if (want == "") != !ok || (ok && (len(got) != 1 || got[0] != want)) {
				t.Fatalf("%s: the change log names %q (%v), want %q (log %v)", what, got, ok, want, p.Log)
			}
			last = p.Changes
		}
		step := func(what string, moves bool, do func() error) {
			t.Helper()
			if moves {
				named(what, s0, do)
				return
			}
			if err := do(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if now := mustPoll(t, st).Stream.Changes; now != last {
				t.Fatalf("%s: the change counter went from %d to %d, want it unmoved", what, last, now)
			}
		}
		var it Shard
		step("create", false, func() (err error) {
			var created bool
			if it, created, err = st.Create(ctx, shard(s0, "100")); err == nil && !created {
				t.Fatal("a new item: Create reports it not created")
			}
			return
		})
		step("the creation announced", true, func() error { st.Announce(ctx, arn, []string{s0}); return nil })
		step("take", true, func() (err error) { it, err = st.Take(ctx, it, "a", "pa"); return })
		step("checkpoint", false, func() (err error) {
			it, err = st.Hold(ctx, arn, s0, "a", it.Counter, Write{Checkpoint: at105(), KeepAsked: true})
			return
		})
		step("ask", true, func() error { return st.Ask(ctx, it, "b", "pb") })
		step("withdraw", true, func() error { return st.Withdraw(ctx, it, "b") })
		step("ask again", true, func() error { return st.Ask(ctx, it, "b", "pb") })
		step("renewal keeping the ask", false, func() (err error) {
			it, err = st.Hold(ctx, arn, s0, "a", it.Counter, Write{KeepAsked: true})
			return
		})
		step("a write removing the ask (its asker died)", true, func() (err error) {
			it, err = st.Hold(ctx, arn, s0, "a", it.Counter, Write{})
			return
		})
		step("asked once more", true, func() error { return st.Ask(ctx, it, "b", "pb") })
		step("handover", true, func() (err error) {
			it, err = st.Hold(ctx, arn, s0, "a", it.Counter, Write{Release: true, HandOver: "b", HandOverNonce: "pb"})
			return
		})
		if !it.HandedOver || it.LastWrite == "" {
			t.Fatalf("handed over: %+v, want HandedOver and a LastWrite", it)
		}
		step("take up", true, func() (err error) { it, err = st.Take(ctx, it, "b", "pb"); return })
		if it.HandedOver || it.LastWrite != "" {
			t.Fatalf("taken up: %+v, want neither HandedOver nor a LastWrite", it)
		}
		step("release", true, func() (err error) {
			it, err = st.Hold(ctx, arn, s0, "b", it.Counter, Write{Release: true})
			return
		})
		step("delete", true, func() error { return st.Delete(ctx, arn, s0) })
		named("overwrite", s1, func() error { return st.Overwrite(ctx, shard(s1, "200"), nil) })
		step("a beat", false, func() error {
			_, err := st.Beat(ctx, arn, "a", Beat{Nonce: "pa", Counter: 1, Bucket: -1}, false)
			return err
		})
		// Many items created at once: the stream as a whole, in one change.
		var many []string
		for i := range 8 {
			id := fmt.Sprintf("shardId-%012d", 100+i)
			if _, created, err := st.Create(ctx, shard(id, "300")); err != nil || !created {
				t.Fatalf("creating %s: created %v, %v", id, created, err)
			}
			many = append(many, id)
		}
		named("8 items created, announced together", "", func() error { st.Announce(ctx, arn, many); return nil })
		if _, created, err := st.Create(ctx, shard(many[0], "300")); err != nil || created {
			t.Fatalf("creating %s again: created %v, %v; want the item there reported, not created", many[0], created, err)
		}
		named("stream written again", "", func() error {
			return st.ReplaceStream(ctx, Stream{ARN: arn, Start: startKind("LATEST"), Pinned: true})
		})
		p := mustPoll(t, st)
		if p.Stream.Start.Kind != "LATEST" || !p.Stream.Pinned || beatsOf(p) != "a:pa:1" {
			t.Fatalf("after the stream's item was written again: %+v, beats %q; want it written, the roster kept", *p.Stream, beatsOf(p))
		}
	})
}

func startKind(kind string) checkpoint.Start { return checkpoint.Start{Kind: kind} }

func at105() *checkpoint.Checkpoint {
	return &checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: "105"}}
}

// TestChangeLog: the stream's item names the shard of each of its last
// logKeep changes and no more (each change drops the entry logKeep before
// it), written whole at the first change of a stream whose item has none
// (an item of a version before the log); a reader further behind, or one
// that finds an entry missing or naming no shard, learns that it must scan.
func TestChangeLog(t *testing.T) {
	t.Parallel()
	bothStores(t, "changelog", func(t *testing.T, st Store) {
		ctx := t.Context()
		if _, _, err := st.PutStream(ctx, Stream{ARN: arn, Start: startKind("TRIM_HORIZON")}); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range 3 {
			id := fmt.Sprintf("shardId-%012d", i)
			if _, _, err := st.Create(ctx, shard(id, "1")); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		st.Announce(ctx, arn, ids) // three changes, each named
		for i := range 2*logKeep + 5 {
			it, _, err := st.Get(ctx, arn, ids[i%3])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Take(ctx, it, fmt.Sprint("i", i), fmt.Sprint("p", i)); err != nil {
				t.Fatal(err)
			}
		}
		p := mustPoll(t, st).Stream
		if n := int64(2*logKeep + 5 + 3); p.Changes != n || len(p.Log) != logKeep {
			t.Fatalf("after %d changes: counter %d, %d entries in the log (%v); want %d and %d", n, p.Changes, len(p.Log), p.Log, n, logKeep)
		}
		const takes = 2*logKeep + 5
		last := []string{ids[(takes-4)%3], ids[(takes-3)%3], ids[(takes-2)%3]} // the fourth names the first again
		if got, ok := p.ChangedSince(p.Changes - 4); !ok || !slices.Equal(got, last) {
			t.Errorf("the last 4 changes: %v (%v), want %v", got, ok, last)
		}
		if got, ok := p.ChangedSince(p.Changes - logKeep); !ok || len(got) != 3 {
			t.Errorf("the last %d changes: %v (%v), want the 3 shards", logKeep, got, ok)
		}
		if got, ok := p.ChangedSince(p.Changes - logKeep - 1); ok {
			t.Errorf("%d changes behind: %v, want a scan", logKeep+1, got)
		}
		if got, ok := p.ChangedSince(p.Changes); !ok || len(got) != 0 {
			t.Errorf("no change: %v (%v), want none", got, ok)
		}
		if got, ok := p.ChangedSince(p.Changes + 1); ok {
			t.Errorf("a counter that went back (the stream's item written anew): %v, want a scan", got)
		}
	})
}

// TestChangedSinceWithEntriesMissing: an entry missing (its writing
// failed, or is on its way) or naming no shard makes the reader scan.
func TestChangedSinceWithEntriesMissing(t *testing.T) {
	t.Parallel()
	s := Stream{Changes: 7, Log: map[int64]string{5: "a", 7: "b"}}
	if got, ok := s.ChangedSince(4); ok {
		t.Errorf("entry 6 missing: %v, want a scan", got)
	}
	if got, ok := s.ChangedSince(6); !ok || !slices.Equal(got, []string{"b"}) {
		t.Errorf("since 6: %v (%v), want b", got, ok)
	}
	s.Log[6] = anyShard
	if got, ok := s.ChangedSince(4); ok {
		t.Errorf("entry 6 names no shard: %v, want a scan", got)
	}
}

// TestAnnouncementThrottledIsOwedNotRetried: with the stream's item
// throttled (a fleet starting on thousands of shards writes it far past
// what DynamoDB serves one item), a take goes through at once: its
// announcement is sent once, not retried by the SDK (which would hold the
// take up and spend the retry quota the beats need), and owed: the next
// poll announces the stream as a whole, and its readers scan.
func TestAnnouncementThrottledIsOwedNotRetried(t *testing.T) {
	t.Parallel()
	const s0 = "shardId-000000000000"
	d := emulator.Dynalite(t)
	proxy := emulator.NewDynamoDBProxy(t, d)
	proxy.Classify(func(op string, body []byte) string {
		if strings.Contains(string(body), `"`+streamKey(arn)+`"`) {
			return "stream"
		}
		return ""
	})
	ctx := t.Context()
	tb, err := Open(ctx, dynamodb.New(dynamodb.Options{Region: d.Region, BaseEndpoint: aws.String(proxy.Endpoint), Credentials: emulator.Credentials()}), "throttledannounce", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.PutStream(ctx, Stream{ARN: arn, Start: startKind("TRIM_HORIZON")}); err != nil {
		t.Fatal(err)
	}
	it, _, err := tb.Create(ctx, shard(s0, "100"))
	if err != nil {
		t.Fatal(err)
	}
	writes := func() int64 {
		calls, _ := proxy.CallsByClass()
		return calls["UpdateItem/stream"]
	}
	proxy.ThrottleClass(time.Minute, "stream")
	before := writes()
	if _, err := tb.Take(ctx, it, "a", "pa"); err != nil {
		t.Fatalf("a take with the stream's item throttled: %v", err)
	}
	if n := writes() - before; n != 1 {
		t.Errorf("the take's announcement wrote the throttled stream item %d times, want once (not retried)", n)
	}
	proxy.ThrottleClass(0, "stream")
	p := mustPoll(t, tb).Stream
	if named, ok := p.ChangedSince(0); p.Changes != 1 || ok {
		t.Errorf("after the throttling, the poll found %d changes, the log naming %v (%v); want the owed one, of the stream as a whole", p.Changes, named, ok)
	}
}
