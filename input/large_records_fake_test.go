package input

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// largeRecords writes, to a stream that takes records of 10 MiB, small
// records with plain records of 1, 5 and 10 MiB and KPL aggregates of
// about 10 MiB among them; each record's data starts with its id and a
// bar. It returns the SHA-256 of every record's (user record's) data by
// id.
func largeRecords(t testing.TB, srv *kinesisfake.Server, stream string, seed uint64) map[string][32]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	want := map[string][32]byte{}
	n := 0
	data := func(size int) (string, []byte) {
		id := fmt.Sprintf("r%06d", n)
		n++
		b := make([]byte, max(size, len(id)+1)+8)
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		b = b[:len(b)-8]
		copy(b, id+"|")
		want[id] = sha256.Sum256(b)
		return id, b
	}
	put := func(size int) {
		id, b := data(size)
		if _, _, err := srv.Put(stream, "key-"+id, b); err != nil {
			t.Fatal(err)
		}
	}
	aggregate := func(users, size int) {
		bld := kpl.Builder{MaxSize: 10 << 20}
		pk := fmt.Sprintf("agg-%d", n) // as the KPL: keys of one shard
		for range users {
			_, b := data(size)
			if err := bld.Add(kpl.UserRecord{PartitionKey: pk, Data: b}); err != nil {
				t.Fatal(err)
			}
		}
		agg, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := srv.Put(stream, agg.PartitionKey, agg.Data); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		put(100 + rng.IntN(900))
	}
	put(1 << 20)
	put(5 << 20)
	put(10 << 20)
	aggregate(9, 1<<20)   // nine user records of 1 MiB
	aggregate(400, 20000) // 400 of 20 KB, about 8 MB
	for range 100 {
		put(100 + rng.IntN(900))
	}
	return want
}

// checkLarge checks that every record of want arrived exactly once, byte
// for byte.
func checkLarge(t *testing.T, msgs []inputtest.Got, want map[string][32]byte) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range msgs {
		id, _, _ := strings.Cut(m.Data, "|")
		seen[id]++
		if sum, ok := want[id]; !ok || sha256.Sum256([]byte(m.Data)) != sum {
			t.Fatalf("record %s (%d bytes) is not as written", id, len(m.Data))
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("record %s arrived %d times", id, seen[id])
		}
	}
}

// TestRecordsOfTenMiB: a stream that takes records of up to 10 MiB holds
// plain records of 1, 5 and 10 MiB and KPL aggregates of about 10 MiB
// among small records; both readers deliver every record and user record
// once, byte for byte, within the default memory_limit.
func TestRecordsOfTenMiB(t *testing.T) {
	t.Parallel()
	for _, reader := range []string{"polling", "efo"} {
		t.Run(reader, func(t *testing.T) {
			t.Parallel()
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 2, kinesisfake.MaxRecordKiB(10240)), kinesisfake.Quotas(false))
			want := largeRecords(t, srv, "orders", 1)
			extra := "reader: polling"
			if reader == "efo" {
				extra = "efo: { consumer_name: app }"
			}
			out := &inputtest.Collector{}
			p := inputtest.StartPipelineWith(t, fakeInput(srv, "orders", t.TempDir(), extra), out.Consume, inputtest.Options{})
			p.StopWhen(t, out, len(want), 2*time.Minute)
			checkLarge(t, out.All(), want)
		})
	}
}
