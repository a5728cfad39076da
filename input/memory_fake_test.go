package input

import (
	"fmt"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// TestMemoryLimitIsNeverExceeded: 32 shards with backlogs, a slow output
// and a memory_limit that holds a small part of them. The input's own
// gauge, kinesis_bytes_in_flight, never passes the records' half of the
// limit (records of one size: no read brings more than the room taken for
// it), it comes back to
// 0 once every record is acknowledged, and every record arrives once, by
// polling and by fan-out. Without the budget, every shard holds a read of
// its whole backlog at once: 32 times the limit.
func TestMemoryLimitIsNeverExceeded(t *testing.T) {
	t.Parallel()
	const (
		shards   = 32
		perShard = 150
		size     = 200
	)
	// About 1.3 KiB a record: the records' half of the limit holds about
	// 150 records of 4,800.
	limit := 150 * (size + shard.RecordOverhead)
	for _, reader := range []string{"polling", "efo"} {
		t.Run(reader, func(t *testing.T) {
			t.Parallel()
			// Events of at most 20 records: a fan-out event cannot be split,
			// and one larger than the limit takes it over.
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", shards), kinesisfake.MaxEventRecords(20))
			want := inputtest.Produced{}
			for k, v := range fakeProducePerShard(t, srv, "orders", fmt.Sprintf("%0*d", size-16, 0), perShard, 4) {
				want[k] = v
			}
			extra := fmt.Sprintf("memory_limit: %d\n", 2*limit)
			if reader == "polling" {
				extra += "reader: polling\npolling: { interval: 200ms }"
			} else {
				extra += "efo: { consumer_name: app }"
			}
			m := &inputtest.Metrics{}
			out := &inputtest.Collector{Slow: 5 * time.Millisecond}
			inputtest.StartPipelineWith(t, fakeInput(srv, "orders", t.TempDir(), extra), out.Consume, inputtest.Options{Metrics: m})
			out.WaitFor(t, len(want), 60*time.Second)
			inputtest.CheckDelivery(t, out.All(), want, true)
			records := int64(limit) // the records' half of memory_limit
			var windows int64
			if reader == "efo" {
				windows = records / 4 // a quarter of it is the subscriptions' windows
				records -= windows
			}
			if peak := m.Peak("kinesis_bytes_in_flight"); peak > records || peak == 0 {
				t.Fatalf("kinesis_bytes_in_flight peaked at %d bytes, the records' part of memory_limit is %d", peak, records)
			} else {
				t.Logf("kinesis_bytes_in_flight peaked at %d of %d bytes", peak, records)
			}
			// The 32 shards' own state (2 MiB and more) takes the records'
			// part down to its floor, an eighth of memory_limit.
			own := shards * readerNamed(reader).shardOwn
			if got, want := m.Counter("kinesis_bytes_in_flight_limit"), recordsRoom(int64(2*limit), windows, own); got != want || want != int64(2*limit)/8 {
				t.Errorf("kinesis_bytes_in_flight_limit %d with %d shards read, want %d, an eighth of memory_limit", got, shards, want)
			}
			inputtest.WaitUntil(t, 10*time.Second, func() bool { return m.Counter("kinesis_bytes_in_flight") == 0 })
		})
	}
}

// TestOutputBatchLargerThanMemoryLimitDoesNotStall: an output batching by
// count more records than memory_limit holds waits for records that wait
// for room it holds. With no room coming back for the stall period, one
// read goes over the limit at a time, and every record arrives (before
// the valve, the stream stalled for good). Not parallel: it shortens the
// stall period for the inputs built meanwhile.
func TestOutputBatchLargerThanMemoryLimitDoesNotStall(t *testing.T) {
	saved := budgetStall
	budgetStall = 100 * time.Millisecond
	t.Cleanup(func() { budgetStall = saved })
	for _, reader := range []string{"polling", "efo"} {
		t.Run(reader, func(t *testing.T) {
			t.Parallel()
			srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4), kinesisfake.MaxEventRecords(10))
			fakeProducePerShard(t, srv, "orders", fmt.Sprintf("%02000d", 0), 50, 4)
			// About 3 KiB a record: after the 4 shards' own state, the
			// records' part holds about 40 (polling) or 20 (fan-out) of the
			// 200, the output's batches want 50 (joined input batches may
			// make one larger: at least 150 are written).
			extra := "memory_limit: 512KiB\n"
			if reader == "polling" {
				extra += "reader: polling\npolling: { interval: 200ms }"
			} else {
				extra += "efo: { consumer_name: app }"
			}
			inConf := fakeYAML(srv, "orders", "{ dir: '"+t.TempDir()+"' }", extra)
			runCountBatchStream(t, inConf, "threads: 1", 50, &countBatchSink{}, 150, "output batches of 50 records, memory_limit holding 20 to 40", nil)
		})
	}
}

// TestInputBatchLargerThanMemoryLimitDoesNotStall: each shard's batch
// policy (count 50) holds more records than memory_limit leaves a shard;
// records waiting in a batcher hold no room, so the shards go on reading
// until their batches fill, and every record arrives once.
func TestInputBatchLargerThanMemoryLimitDoesNotStall(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4))
	want := inputtest.Produced{}
	for k, v := range fakeProducePerShard(t, srv, "orders", fmt.Sprintf("%02000d", 0), 50, 4) {
		want[k] = v
	}
	extra := "memory_limit: 128KiB\nreader: polling\npolling: { interval: 200ms }\nbatching: { count: 50 }"
	out := &inputtest.Collector{}
	inputtest.StartPipelineWith(t, fakeInput(srv, "orders", t.TempDir(), extra), out.Consume, inputtest.Options{})
	out.WaitFor(t, len(want), 30*time.Second)
	inputtest.CheckDelivery(t, out.All(), want, true)
}
