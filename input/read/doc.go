// Package read reads Kinesis streams for the input: a Stream per stream
// discovers its shards, decides which may be read (every parent read to its
// end first) and runs a shardReader per readable shard that its coordinator
// grants; a shardReader turns a Publisher's reads into Benthos batches,
// sends them to the component as Deliveries, tracks them until acknowledged
// and tells the coordinator what may be checkpointed.
//
// Everything a reader needs arrives in one Env, built by the component from
// its configuration: the package knows nothing of the component (input) or
// of how positions are stored (coord.Coordination hides the checkpoint file
// and the lease table), and a test keeps it so.
//
// Goroutines, and who owns what:
//   - Stream.Run is the stream's loop: it owns the shard map and the running
//     readers (shards, running, firstPin, unpinned), and starts one
//     goroutine per shard reader, which it joins before returning.
//   - shardReader.run is the reader's loop: it owns the converter, the
//     batcher and the reads being emitted (held, end, pending, lastPos). It
//     starts the publisher goroutine (publish), joined before run returns,
//     which hands over one read at a time on an unbuffered channel.
//   - The ack tracker and the room ledger are shared with the pipeline's
//     goroutines, which acknowledge.
//
// Lock order, the one place it is written (TestLockOrder takes every path
// of it at once, under -race in make test): a shard's ack tracker, then its
// room ledger (the tracker tells the ledger of what it resolved under its
// own lock: roomLedger.resolve, roomLedger.exited), then the memory budget
// (membudget.Budget.Give, Force, SetLimit), then the metrics' own (a gauge
// set under the budget's lock or the tracker's). Nothing calls back up that
// order: the budget runs its member-count callback outside its lock (under
// a lock of its own, taken before its main one), a shard reader tells its
// grant what was acknowledged after the tracker's lock is let go, and no
// coordinator lock is taken under any of these.
package read
