package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// step is one call of the conformance script and what it gives on every
// Store: a summary of its result (see show) and its error (errors.Is).
type step struct {
	name string
	call func(ctx context.Context, st Store) (string, error)
	want string
	err  error
}

// TestConformance runs one script of calls against the DynamoDB table
// (dynalite) and Memory: both must give the same results, so tests of the
// input's lease policy on Memory hold for the table.
func TestConformance(t *testing.T) {
	t.Parallel()
	script := conformanceScript()
	t.Run("dynalite", func(t *testing.T) {
		t.Parallel()
		runScript(t, open(t, emulator.Dynalite(t), "conformance"), script)
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		runScript(t, NewMemory(), script)
	})
	// Groups on one table never meet: the script gives the same results in
	// each group of a table the default group and another group already
	// went through (same stream, same shards, same instances).
	t.Run("groups", func(t *testing.T) {
		t.Parallel()
		tb := open(t, emulator.Dynalite(t), "groups")
		for _, group := range []string{"", "archiver", "indexer"} {
			runScript(t, Grouped(tb, group), script)
		}
		mem := NewMemory()
		for _, group := range []string{"", "archiver"} {
			runScript(t, Grouped(mem, group), script)
		}
	})
}

func runScript(t *testing.T, st Store, script []step) {
	t.Helper()
	for i, s := range script {
		got, err := s.call(t.Context(), st)
		if !errors.Is(err, s.err) || got != s.want {
			t.Fatalf("step %d, %s: %q, %v; want %q, %v", i, s.name, got, err, s.want, s.err)
		}
	}
}

func conformanceScript() []step {
	const s0, s1, s2, s3, s9 = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000009"
	at := func(seq string) *checkpoint.Checkpoint {
		return &checkpoint.Checkpoint{Position: &checkpoint.Position{Sequence: seq}}
	}
	end := &checkpoint.Checkpoint{Ended: true}
	return []step{
		{"create", create(s0, "100"), "owner= counter=0 ask= at=TRIM_HORIZON start=100", nil},
		{"create again keeps the first", create(s0, "999"), "owner= counter=0 ask= at=TRIM_HORIZON start=100", nil},
		{"take of the free lease", take(s0, "", 0, "a"), "owner=a counter=1 ask= at=TRIM_HORIZON start=100", nil},
		{"take of a stale scan", take(s0, "", 0, "b"), "-", ErrLost},
		{"hold with a checkpoint", hold(s0, "a", 1, Write{Checkpoint: at("105")}), "owner=a counter=2 ask= at=105 start=100", nil},
		{"hold at a counter moved since", hold(s0, "a", 1, Write{}), "-", ErrLost},
		{"ask", ask(s0, "a", "b"), "", nil},
		{"ask leaves the counter", get(s0), "owner=a counter=2 ask=b at=105 start=100", nil},
		{"a second ask", ask(s0, "a", "c"), "", ErrLost},
		{"renewal keeping the ask", hold(s0, "a", 2, Write{KeepAsked: true}), "owner=a counter=3 ask=b at=105 start=100", nil},
		{"withdraw", withdraw(s0, "b"), "", nil},
		{"withdraw of no ask", withdraw(s0, "b"), "", nil},
		{"handover after the withdraw", hold(s0, "a", 3, Write{Release: true, HandOver: "b"}), "owner=a counter=3 ask= at=105 start=100", ErrWithdrawn},
		{"ask again", ask(s0, "a", "b"), "", nil},
		{"handover with a checkpoint", hold(s0, "a", 3, Write{Checkpoint: at("110"), Release: true, HandOver: "b"}), "owner=b counter=4 ask= at=110 start=100", nil},
		{"ask of the new holder", ask(s0, "b", "c"), "", nil},
		{"renewal dropping the ask", hold(s0, "b", 4, Write{}), "owner=b counter=5 ask= at=110 start=100", nil},
		{"take from the holder", take(s0, "b", 5, "c"), "owner=c counter=6 ask= at=110 start=100", nil},
		{"the old holder's renewal", hold(s0, "b", 5, Write{KeepAsked: true}), "-", ErrLost},
		{"the old holder's release", hold(s0, "b", 5, Write{Checkpoint: end, Release: true}), "-", ErrLost},
		{"delete of a held item", del(s0), "", nil},
		{"a held item stays", get(s0), "owner=c counter=6 ask= at=110 start=100", nil},
		{"release at the end", hold(s0, "c", 6, Write{Checkpoint: end, Release: true}), "owner= counter=7 ask= at=end start=100", nil},
		{"delete of a free item", del(s0), "", nil},
		{"a free item is deleted", get(s0), "none", nil},

		{"create another", create(s1, "200"), "owner= counter=0 ask= at=TRIM_HORIZON start=200", nil},
		{"take it", take(s1, "", 0, "a"), "owner=a counter=1 ask= at=TRIM_HORIZON start=200", nil},
		{"hold it", hold(s1, "a", 1, Write{}), "owner=a counter=2 ask= at=TRIM_HORIZON start=200", nil},
		{"replace of another start", replace(s1, "300", "999"), "", nil},
		{"replace of another start writes nothing", get(s1), "owner=a counter=2 ask= at=TRIM_HORIZON start=200", nil},
		{"replace", replace(s1, "300", "200"), "", nil},
		{"replace continues the counter", get(s1), "owner= counter=3 ask= at=TRIM_HORIZON start=300", nil},
		{"the old holder after the replace", hold(s1, "a", 2, Write{}), "-", ErrLost},
		{"overwrite as read", overwrite(s1, "150", 3), "", nil},
		{"overwrite moves the counter", get(s1), "owner= counter=4 ask= at=150 start=300", nil},
		{"overwrite of a stale read", overwrite(s1, "160", 3), "", ErrLost},
		{"overwrite of an absent item", overwrite(s2, "170", -1), "", nil},
		{"overwrite of an item that appeared", overwrite(s2, "180", -1), "", ErrLost},
		{"overwrite writes a free item at 0", get(s2), "owner= counter=0 ask= at=170 start=300", nil},

		{"create a third", create(s3, "400"), "owner= counter=0 ask= at=TRIM_HORIZON start=400", nil},
		{"take by a process", takeBy(s3, "", 0, "a", "pa"), "owner=a/pa counter=1 ask= at=TRIM_HORIZON start=400", nil},
		{"ask by a process", askBy(s3, "a", "b", "pb"), "", nil},
		{"the ask names its process", get(s3), "owner=a/pa counter=1 ask=b/pb at=TRIM_HORIZON start=400", nil},
		{"handover to another process of the asker", hold(s3, "a", 1, Write{Release: true, HandOver: "b", HandOverNonce: "pb2"}), "owner=a/pa counter=1 ask=b/pb at=TRIM_HORIZON start=400", ErrWithdrawn},
		{"handover to the asking process", hold(s3, "a", 1, Write{Release: true, HandOver: "b", HandOverNonce: "pb"}), "owner=b/pb counter=2 ask= at=TRIM_HORIZON start=400", nil},
		{"a release drops the process", hold(s3, "b", 2, Write{Release: true}), "owner= counter=3 ask= at=TRIM_HORIZON start=400", nil},
		{"take by a process again", takeBy(s3, "", 3, "c", "pc"), "owner=c/pc counter=4 ask= at=TRIM_HORIZON start=400", nil},
		{"a take without one drops it", take(s3, "c", 4, "d"), "owner=d counter=5 ask= at=TRIM_HORIZON start=400", nil},

		// A write after one of the holder's whose answer never came
		// (Write.After) applies at the counter after the one it names when
		// that write is the item's last, and at no other; a take removes
		// the last write's ID.
		{"take by e", takeBy(s3, "d", 5, "e", "pe"), "owner=e/pe counter=6 ask= at=TRIM_HORIZON start=400", nil},
		{"a write after a lost one not applied", hold(s3, "e", 6, Write{Checkpoint: at("405"), ID: "w2", After: "w1"}), "owner=e/pe counter=7 ask= at=405 start=400", nil},
		{"the lost one, held up, applied after it", hold(s3, "e", 6, Write{Checkpoint: at("400"), ID: "w1"}), "-", ErrLost},
		{"the same after a write of before", hold(s3, "e", 6, Write{Checkpoint: at("400"), ID: "w1", After: "w0"}), "-", ErrLost},
		{"a write whose answer is lost", hold(s3, "e", 7, Write{Checkpoint: at("410"), ID: "w3"}), "owner=e/pe counter=8 ask= at=410 start=400", nil},
		{"the next, one behind it", hold(s3, "e", 7, Write{Checkpoint: at("415"), ID: "w4", After: "w3"}), "owner=e/pe counter=9 ask= at=415 start=400", nil},
		{"two behind", hold(s3, "e", 7, Write{Checkpoint: at("420"), ID: "w5", After: "w3"}), "-", ErrLost},
		{"one behind without After", hold(s3, "e", 8, Write{Checkpoint: at("420")}), "-", ErrLost},
		{"e taken over by its name's other process", takeBy(s3, "e", 9, "e", "pe2"), "owner=e/pe2 counter=10 ask= at=415 start=400", nil},
		{"the old process one behind the take", hold(s3, "e", 9, Write{Checkpoint: at("420"), After: "w4"}), "-", ErrLost},
		{"a write of the new process", hold(s3, "e", 10, Write{ID: "w7"}), "owner=e/pe2 counter=11 ask= at=415 start=400", nil},
		{"an ask of e", askBy(s3, "e", "f", "pf"), "", nil},
		{"a handover one behind", hold(s3, "e", 10, Write{Release: true, HandOver: "f", HandOverNonce: "pf", ID: "w8", After: "w7"}), "owner=f/pf counter=12 ask= at=415 start=400", nil},
		{"the handover again, its answer lost", hold(s3, "e", 10, Write{Release: true, HandOver: "f", HandOverNonce: "pf", After: "w7"}), "-", ErrLost},

		{"put stream", putStream("TRIM_HORIZON"), "written TRIM_HORIZON pinned=false", nil},
		{"put stream again keeps the first", putStream("LATEST"), "kept TRIM_HORIZON pinned=false", nil},
		{"replace stream", replaceStream("AT_TIMESTAMP"), "", nil},
		{"put stream after the replace", putStream("LATEST"), "kept AT_TIMESTAMP pinned=true", nil},

		{"heartbeat", heartbeat("a", "n1", false), "", nil},
		{"a worker item", worker("a"), "a counter=1 nonce=n1", nil},
		{"heartbeat again", heartbeat("a", "n1", false), "", nil},
		{"heartbeat of another process", heartbeat("a", "n2", false), "", ErrDuplicateInstance},
		{"a refused heartbeat writes nothing", worker("a"), "a counter=2 nonce=n1", nil},
		{"take over", heartbeat("a", "n2", true), "", nil},
		{"take over moves the counter", worker("a"), "a counter=3 nonce=n2", nil},
		{"heartbeat of the process taken over", heartbeat("a", "n1", false), "", ErrDuplicateInstance},
		{"remove at a counter moved since", removeWorker("a", 2), "removed=false", nil},
		{"a live worker stays", worker("a"), "a counter=3 nonce=n2", nil},
		{"remove at its counter", removeWorker("a", 3), "removed=true", nil},
		{"an expired worker is removed", worker("a"), "none", nil},
		{"remove of a missing worker", removeWorker("a", 3), "removed=false", nil},
		{"heartbeat listing the leases held", heartbeatHeld("a", "n1", 7, s1, s0), "", nil},
		{"an item written again starts past the process's last counter", worker("a"), "a counter=8 nonce=n1 held=[shardId-000000000000 shardId-000000000001]", nil},
		{"remove it again", removeWorker("a", 8), "removed=true", nil},
		{"a heartbeat writes the item anew", heartbeatBorn("a", "n1", 8, "h9"), "", nil},
		{"born of that heartbeat", worker("a"), "a counter=9 nonce=n1 born=h9", nil},
		{"a later heartbeat keeps it", heartbeatBorn("a", "n1", 9, "h10"), "", nil},
		{"still born of the first", worker("a"), "a counter=10 nonce=n1 born=h9", nil},
		{"removed at its counter", removeWorker("a", 10), "removed=true", nil},
		{"a heartbeat held up on its way writes it anew at that counter", heartbeatBorn("a", "n1", 9, "h11"), "", nil},
		{"the same counter, another item", worker("a"), "a counter=10 nonce=n1 born=h11", nil},
		{"a removal of the item seen before", removeWorker("a", 10, "h9"), "removed=false", nil},
		{"does not remove the new item", worker("a"), "a counter=10 nonce=n1 born=h11", nil},
		{"a removal of an item without born", removeWorker("a", 10, ""), "removed=false", nil},
		{"does not remove one with it", worker("a"), "a counter=10 nonce=n1 born=h11", nil},
		{"a removal of the new item", removeWorker("a", 10, "h11"), "removed=true", nil},
		{"removes it", worker("a"), "none", nil},
		{"heartbeat of b", heartbeat("b", "n3", false), "", nil},
		{"heartbeat of c", heartbeat("c", "n4", false), "", nil},
		{"heartbeat with loads", heartbeatLoads("c", "n4", map[string]float64{s0: 2048.4, s1: 0}), "", nil},
		{"loads in whole bytes a second", worker("c"), "c counter=2 nonce=n4 loads=map[shardId-000000000000:2048 shardId-000000000001:0]", nil},
		{"a heartbeat without loads clears them", heartbeat("c", "n4", false), "", nil},
		{"no loads", worker("c"), "c counter=3 nonce=n4", nil},
		{"heartbeat with a config digest", heartbeatConfig("c", "n4", map[string]string{"output": "0a1b", "build": "v1"}), "", nil},
		{"the config digest", worker("c"), "c counter=4 nonce=n4 config=map[build:v1 output:0a1b]", nil},
		{"a heartbeat without one removes it", heartbeat("c", "n4", false), "", nil},
		{"no digest", worker("c"), "c counter=5 nonce=n4", nil},
		{"leave", leave("b"), "", nil},
		{"a worker that left", worker("b"), "none", nil},

		{"claim", claim("efo", "a"), "true", nil},
		{"claim by another", claim("efo", "b"), "false", nil},
		{"claim again", claim("efo", "a"), "true", nil},
		{"drop", drop("efo"), "", nil},
		{"claim after the drop", claim("efo", "b"), "true", nil},

		{"scan", scan(false), "stream=AT_TIMESTAMP shards=[shardId-000000000001 shardId-000000000002 shardId-000000000003] workers=[c:5:n4]", nil},
		{"consistent scan", scan(true), "stream=AT_TIMESTAMP shards=[shardId-000000000001 shardId-000000000002 shardId-000000000003] workers=[c:5:n4]", nil},

		// An instance whose listing is behind (the stream was created
		// again since) never puts the old stream's shard back.
		{"create of a stream's shard", createAt(s9, "100", 1), "owner= counter=0 ask= at=TRIM_HORIZON start=100", nil},
		{"replace by the stream created later", replaceAt(s9, "300", "100", 2), "", nil},
		{"replace by a listing behind", replaceAt(s9, "100", "300", 1), "", ErrLaterStream},
		{"a listing behind writes nothing", get(s9), "owner= counter=1 ask= at=TRIM_HORIZON start=300", nil},
		{"replace by a stream of unknown creation", replaceAt(s9, "100", "300", 0), "", nil},
		{"replace by the latest stream", replaceAt(s9, "500", "100", 3), "", nil},
		{"the latest stream's item", get(s9), "owner= counter=3 ask= at=TRIM_HORIZON start=500", nil},
	}
}

// createdAt is the creation time of the nth stream of a name: zero for 0
// (not known).
func createdAt(n int) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Date(2026, 1, n, 0, 0, 0, 0, time.UTC)
}

func createAt(id, shardStart string, stream int) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		sh := shard(id, shardStart)
		sh.Created = createdAt(stream)
		s, _, err := st.Create(ctx, sh)
		return show(s), err
	}
}

func replaceAt(id, shardStart, was string, stream int) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		sh := shard(id, shardStart)
		sh.Created = createdAt(stream)
		return "", st.Replace(ctx, sh, was)
	}
}

// show summarizes a shard item; "-" is the zero Shard (a failed write).
func show(s Shard) string {
	if s.Stream == "" {
		return "-"
	}
	at := s.Checkpoint.Start.Kind
	switch cp := s.Checkpoint; {
	case cp.Ended:
		at = "end"
	case cp.Position != nil:
		at = cp.Position.Sequence
	}
	owner, asker := s.Owner, s.HandoffTo
	if s.OwnerNonce != "" {
		owner += "/" + s.OwnerNonce
	}
	if s.HandoffNonce != "" {
		asker += "/" + s.HandoffNonce
	}
	out := fmt.Sprintf("owner=%s counter=%d ask=%s at=%s start=%s", owner, s.Counter, asker, at, s.Checkpoint.ShardStart)
	if s.Stream != arn {
		out += " of " + s.Stream // a store that returned another stream's id (a group's)
	}
	return out
}

func shard(id, shardStart string) Shard {
	return Shard{Stream: arn, ShardID: id, Checkpoint: checkpoint.Checkpoint{Start: checkpoint.Start{Kind: "TRIM_HORIZON"}, ShardStart: shardStart}}
}

func create(id, shardStart string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s, _, err := st.Create(ctx, shard(id, shardStart))
		return show(s), err
	}
}

func get(id string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s, ok, err := st.Get(ctx, arn, id)
		if !ok {
			return "none", err
		}
		return show(s), err
	}
}

// take takes the lease as scanned held by owner (free when empty) at
// counter.
func take(id, owner string, counter int64, me string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s, err := st.Take(ctx, Shard{Stream: arn, ShardID: id, Owner: owner, Counter: counter}, me, "")
		return show(s), err
	}
}

// takeBy is take by the process nonce of me.
func takeBy(id, owner string, counter int64, me, nonce string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s, err := st.Take(ctx, Shard{Stream: arn, ShardID: id, Owner: owner, Counter: counter}, me, nonce)
		return show(s), err
	}
}

// askBy is ask by the process nonce of me.
func askBy(id, owner, me, nonce string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Ask(ctx, Shard{Stream: arn, ShardID: id, Owner: owner}, me, nonce)
	}
}

func hold(id, me string, counter int64, w Write) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s, err := st.Hold(ctx, arn, id, me, counter, w)
		return show(s), err
	}
}

func ask(id, owner, me string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Ask(ctx, Shard{Stream: arn, ShardID: id, Owner: owner}, me, "")
	}
}

func withdraw(id, me string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Withdraw(ctx, Shard{Stream: arn, ShardID: id}, me)
	}
}

func del(id string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) { return "", st.Delete(ctx, arn, id) }
}

func replace(id, shardStart, was string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Replace(ctx, shard(id, shardStart), was)
	}
}

// overwrite writes the item of id at position seq, as read at counter prev
// (absent when prev is negative). The start is 300.
func overwrite(id, seq string, prev int64) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s := shard(id, "300")
		s.Checkpoint.Position = &checkpoint.Position{Sequence: seq}
		var read *Shard
		if prev >= 0 {
			read = &Shard{Stream: arn, ShardID: id, Counter: prev}
		}
		return "", st.Overwrite(ctx, s, read)
	}
}

func putStream(kind string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		s, written, err := st.PutStream(ctx, Stream{ARN: arn, Start: checkpoint.Start{Kind: kind}})
		verb := map[bool]string{true: "written", false: "kept"}[written]
		return fmt.Sprintf("%s %s pinned=%t", verb, s.Start.Kind, s.Pinned), err
	}
}

// replaceStream pins a stream starting at a fixed time.
func replaceStream(kind string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		ts := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
		return "", st.ReplaceStream(ctx, Stream{ARN: arn, Start: checkpoint.Start{Kind: kind, Timestamp: &ts}, Pinned: true})
	}
}

func heartbeat(me, nonce string, takeOver bool) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Heartbeat(ctx, arn, me, Presence{Nonce: nonce}, takeOver)
	}
}

func heartbeatHeld(me, nonce string, beat int64, held ...string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Heartbeat(ctx, arn, me, Presence{Nonce: nonce, Held: held, Beat: beat}, false)
	}
}

func heartbeatLoads(me, nonce string, loads map[string]float64) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Heartbeat(ctx, arn, me, Presence{Nonce: nonce, Loads: loads}, false)
	}
}

func heartbeatConfig(me, nonce string, config map[string]string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Heartbeat(ctx, arn, me, Presence{Nonce: nonce, Config: config}, false)
	}
}

func worker(id string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		w, ok, err := st.GetWorker(ctx, arn, id)
		if !ok {
			return "none", err
		}
		out := fmt.Sprintf("%s counter=%d nonce=%s", w.ID, w.Counter-counterBase(Presence{Nonce: workerBases[id]}), w.Nonce)
		if w.Born != "" {
			out += " born=" + w.Born
		}
		if len(w.Held) > 0 {
			out += fmt.Sprintf(" held=%v", slices.Sorted(maps.Keys(w.Held)))
		}
		if !w.Listed {
			out += " unlisted"
		}
		if len(w.Loads) > 0 {
			out += fmt.Sprintf(" loads=%v", w.Loads)
		}
		if len(w.Config) > 0 {
			out += fmt.Sprintf(" config=%v", w.Config)
		}
		return out, err
	}
}

// workerBases names the process whose counter base a worker's counters
// are shown from: the first to write its item (see counterBase).
var workerBases = map[string]string{"a": "n1", "b": "n3", "c": "n4"}

// removeWorker removes the worker item of id as seen at counter: of the
// item there now (its Born), or, with born, of another one.
func removeWorker(id string, counter int64, born ...string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		seen := Worker{ID: id, Counter: counter + counterBase(Presence{Nonce: workerBases[id]})}
		if len(born) > 0 {
			seen.Born = born[0]
		} else if now, ok, err := st.GetWorker(ctx, arn, id); err != nil {
			return "", err
		} else if ok {
			seen.Born = now.Born
		}
		removed, err := st.RemoveWorker(ctx, arn, seen)
		return fmt.Sprintf("removed=%v", removed), err
	}
}

func heartbeatBorn(me, nonce string, beat int64, born string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.Heartbeat(ctx, arn, me, Presence{Nonce: nonce, Beat: beat, Born: born}, false)
	}
}

func leave(me string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) { return "", st.Leave(ctx, arn, me) }
}

func claim(consumer, me string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		ok, err := st.ClaimRegistration(ctx, arn, consumer, me)
		return fmt.Sprint(ok), err
	}
}

func drop(consumer string) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		return "", st.DropRegistration(ctx, arn, consumer)
	}
}

// scan summarizes a scan in an order of its own (a scan's is the table's).
func scan(consistent bool) func(context.Context, Store) (string, error) {
	return func(ctx context.Context, st Store) (string, error) {
		read := st.Scan
		if consistent {
			read = st.ScanConsistent
		}
		sc, err := read(ctx, arn)
		if err != nil {
			return "", err
		}
		stream := "none"
		if sc.Stream != nil {
			stream = sc.Stream.Start.Kind
			if sc.Stream.ARN != arn {
				stream += "(of " + sc.Stream.ARN + ")"
			}
		}
		var shards, workers []string
		for _, s := range sc.Shards {
			if s.Stream != arn {
				shards = append(shards, s.ShardID+"(of "+s.Stream+")")
				continue
			}
			shards = append(shards, s.ShardID)
		}
		for _, w := range sc.Workers {
			workers = append(workers, fmt.Sprintf("%s:%d:%s", w.ID, w.Counter-counterBase(Presence{Nonce: workerBases[w.ID]}), w.Nonce))
		}
		slices.Sort(shards)
		slices.Sort(workers)
		return fmt.Sprintf("stream=%s shards=[%s] workers=[%s]", stream, strings.Join(shards, " "), strings.Join(workers, " ")), nil
	}
}
