// Package leasecoord is the coordinator of instances that share the shards
// of a stream through a DynamoDB lease table (input/lease): one item per
// shard, taken, renewed, balanced and handed over by writes conditional on
// owner and counter.
//
// A held lease is a state machine in one type, leaseBook (state.go): held
// (renewed within the lease period; one reader), fenced (not renewed for a
// lease period: its reader stopped, its acknowledgements still count, and a
// renewal at the same counter resumes after them), handing over (asked for
// by an instance not known dead: the last checkpoint and the handover are
// one write once what the reader handed out is settled), released and lost
// (terminal). Every transition is a method of leaseBook with the invariant
// it keeps; nothing else changes a lease's state or takes its lock. What an
// instance saw of the others, by its own clock, is its leaseView (view.go):
// expiry, liveness (a worker item seen for the first time is alive only
// once it moves), its asks. cycle.go balances (balance.go decides who takes
// what), commit.go writes, coordinator.go loads, pins and grants.
//
// Lock order: the coordinator's saveMu (its writes) first; under it, or
// alone, at most one of the positions' lock, leaseBook.mu and leaseView.mu.
package leasecoord
