// Package leasecoord is the coordinator of instances that share the shards
// of a stream through a DynamoDB lease table (input/lease): one item per
// shard, taken, renewed, balanced and handed over by writes conditional on
// owner and counter, each process told apart from another of the same
// instance_id by a nonce in its worker item, its leases and its asks.
//
// A held lease is a state machine in one type, leaseBook (state.go): held
// (renewed within the lease period by its take or a beat, counted from when
// the renewal was sent and only if it came back before the lapse; one
// reader), fenced (not renewed for a lease period: its reader stopped, its
// acknowledgements still count, a beat and then a write of its item at the
// same counter resume after them, and after a lease period it is given
// up), handing over (asked for by a
// process seen alive since its ask: the last checkpoint and the handover
// are one write once what the reader handed out is settled, if the asker is
// alive then), released and lost (terminal). Every transition is a method
// of leaseBook with the invariant it keeps; nothing else changes a lease's
// state or takes its lock. What an instance saw of the others, by its own
// clock, is its leaseView (view.go): expiry, liveness (a beat seen for the
// first time is alive only once it moves), the processes known dead, its
// asks. presence.go beats in the stream's roster and reads the others'
// beats every cycle; the items the stream's change log names are read when
// its counter says an owner changed, and the stream's items are scanned
// only when the log does not name them all, or many (cycle.go, look and
// readChanged). cycle.go balances (balance.go and balance_load.go decide
// who takes and asks for what), commit.go writes, coordinator.go loads,
// pins and grants.
//
// The coordinator lives by a Clock (clock.go): the wall clock in the
// input, a virtual one in the simulation (sim_test.go), which runs many
// instances from a seed and checks the invariants at every step.
//
// Lock order: the coordinator's saveMu (its writes) first; under it, or
// alone, at most one of the positions' lock, leaseBook.mu and leaseView.mu.
package leasecoord
