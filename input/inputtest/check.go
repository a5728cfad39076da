package inputtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// CheckDelivery asserts that every produced record arrived, nothing else did,
// and (when exactlyOnce) none twice.
func CheckDelivery(t testing.TB, msgs []Got, want Produced, exactlyOnce bool) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range msgs {
		if _, ok := want[m.Data]; !ok {
			t.Fatalf("unexpected record %q (stream %s shard %s seq %s)", m.Data, m.Stream, m.Shard, m.Seq)
		}
		if want[m.Data] != m.PK {
			t.Fatalf("record %q has partition key %q, want %q", m.Data, m.PK, want[m.Data])
		}
		seen[m.Data]++
	}
	var missing, dup []string
	for d := range want {
		switch {
		case seen[d] == 0:
			missing = append(missing, d)
		case seen[d] > 1 && exactlyOnce:
			dup = append(dup, fmt.Sprintf("%s x%d", d, seen[d]))
		}
	}
	sort.Strings(missing)
	sort.Strings(dup)
	if len(missing) > 0 {
		t.Fatalf("%d of %d records lost, e.g. %v", len(missing), len(want), Head(missing))
	}
	if len(dup) > 0 {
		t.Fatalf("%d records delivered more than once, e.g. %v", len(dup), Head(dup))
	}
}

// CheckOrder asserts that, within one run, each shard's records arrived in
// sequence order, and each partition key's records in the order produced.
func CheckOrder(t testing.TB, msgs []Got) {
	t.Helper()
	checkOrder(t, msgs, false)
}

// CheckOrderKeysPerShard is CheckOrder for producers that store one partition
// key in several shards, as aggregates of mixed keys routed by an explicit
// hash key do: Kinesis orders a key's records only within a shard, so each
// partition key's records are checked per shard.
func CheckOrderKeysPerShard(t testing.TB, msgs []Got) {
	t.Helper()
	checkOrder(t, msgs, true)
}

func checkOrder(t testing.TB, msgs []Got, keysPerShard bool) {
	t.Helper()
	lastSeq := map[string]Got{}
	lastData := map[string]string{}
	for _, m := range msgs {
		key := m.Stream + "/" + m.Shard
		if prev, ok := lastSeq[key]; ok && !prev.Position().Less(m.Position()) {
			t.Fatalf("shard %s out of order: %s/%s after %s/%s", key, m.Seq, m.Sub, prev.Seq, prev.Sub)
		}
		lastSeq[key] = m
		pk := m.Stream + "/" + m.PK
		if keysPerShard {
			pk = key + "/" + m.PK
		}
		if prev, ok := lastData[pk]; ok && prev >= m.Data {
			t.Fatalf("partition key %s out of order: %s after %s", pk, m.Data, prev)
		}
		lastData[pk] = m.Data
	}
}

// CheckPlacement asserts that every message that is a user record of an
// aggregate came from the shard its aggregate was stored in, and that exactly
// those whose hash key lies outside that shard's range are flagged
// kinesis_hash_key_out_of_range (no other message is). It returns how many
// messages are flagged.
func CheckPlacement(t testing.TB, msgs []Got, placed map[string]Placement) (flagged int) {
	t.Helper()
	for _, m := range msgs {
		p, isUser := placed[m.Data]
		switch {
		case isUser && m.Shard != p.Shard:
			t.Fatalf("user record %s came from shard %s, but its aggregate was stored in shard %s", m.Data, m.Shard, p.Shard)
		case m.OutOfRange != p.OutOfRange: // p is the zero Placement unless isUser
			t.Fatalf("user record %s (partition key %s, shard %s seq %s sub %q): kinesis_hash_key_out_of_range %v, want %v",
				m.Data, m.PK, m.Shard, m.Seq, m.Sub, m.OutOfRange, p.OutOfRange)
		}
		if m.OutOfRange {
			flagged++
		}
	}
	return flagged
}

func Head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// ReadCheckpoints loads the checkpoint file of a stream from dir.
func ReadCheckpoints(t testing.TB, dir, streamARN string) checkpoint.Stream {
	t.Helper()
	f, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := f.Load(context.Background(), streamARN)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ReadCheckpointsUnlocked reads a stream's checkpoint file while its owner
// may hold the lock (the file is replaced atomically, so a read sees a whole
// version).
func ReadCheckpointsUnlocked(t testing.TB, dir, streamARN string) checkpoint.Stream {
	t.Helper()
	f, _ := checkpoint.OpenFile(t.TempDir())
	name := filepath.Base(f.Path(streamARN))
	data, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return checkpoint.Stream{}
	}
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadCheckpoints(t, tmp, streamARN)
}

// AfterCheckpoint reports whether m lies after the checkpoint of its shard.
func AfterCheckpoint(m Got, cps checkpoint.Stream) bool {
	cp, ok := cps.Shards[m.Shard]
	if !ok || cp.Position == nil {
		return true
	}
	if cp.Ended {
		return false
	}
	return cp.Position.Less(m.Position())
}
