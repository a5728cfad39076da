package leasecoord

import (
	"cmp"
	"hash/fnv"
	"maps"
	"slices"
)

// claim is a readable shard's lease as the balance sees it.
type claim struct {
	shard   string
	owner   string // "" when free
	expired bool   // the owner did not renew it for a lease period
	// overdue: free or expired for a while, and not taken by the instance
	// the plan gave it to (see planFree): anyone with room takes it.
	overdue bool
	asked   string // the instance that asked its owner for it, if any
	// dwelling: it changed hands within the dwell: not moved by load.
	dwelling bool
	// left: the instance it last left, if known: a move by load does not
	// make a lease go back there (loadBook.byLoad).
	left string
	// load is the shard's throughput in bytes/s, smoothed, as its holder
	// published it; measured says whether it did (a free shard, or one
	// whose holder has no figure yet, is not measured: load is then 0).
	load     float64
	measured bool
}

// balance decides which leases me takes now and which it asks their live
// holders to hand over, so that every live instance ends up holding as many
// readable leases as every other, give or take one:
//
//   - leases its holder handed to me, and free or expired ones, up to its
//     share (the readable leases divided by the instances, rounded up), as
//     the plan of planFree gives them to it, and overdue ones, whoever the
//     plan gave them to;
//   - then, while it still holds fewer than its share, up to steals leases of
//     the instances that hold at least two more than it does (the most loaded
//     first), one lease per instance and ask.
//
// live holds the instances known to be alive (me among them); claims held by
// instances not in live count as theirs while not expired, and a lease a
// live instance asked for counts as that asker's.
func balance(me string, claims []claim, live map[string]bool, steals int) (take, ask []claim) {
	live = withoutLapsed(live, claims, me)
	counts := map[string]int{}
	for id := range live {
		counts[id] = 0
	}
	counts[me] = 0
	var free []claim
	for _, c := range claims {
		switch {
		case c.owner == me:
			counts[me]++
		case c.owner == "" || c.expired:
			free = append(free, c)
		case c.asked == me || (c.asked != "" && live[c.asked]):
			// Asked already: counted as coming to its asker, whoever
			// asked. Counted as its holder's, two instances that ask the
			// same holder in turn would each take it down to their share
			// and leave it below its own (16 over 3: 4, 6, 6), which it
			// would then ask back.
			counts[c.asked]++
		default:
			counts[c.owner]++
		}
	}
	share := (len(claims) + len(counts) - 1) / len(counts)
	for _, p := range planFree(free, counts, live, me, share) {
		switch {
		case p.to == me:
			take = append(take, p.claim)
		case p.overdue:
			// Not taken by the instance it fell to for half a lease period
			// (its scans may fail while it lives): read here rather than
			// not at all, beyond the share if need be; the balance evens
			// the counts later.
			take = append(take, p.claim)
			counts[me]++
			counts[p.to]--
		}
	}
	mine := counts[me]
	if mine >= share || steals <= 0 {
		return take, ask
	}
	// Ask the most loaded live holders, one lease each per round (one not
	// alive is not asked: its leases expire, or it comes back).
	byOwner := map[string][]claim{}
	for _, c := range claims {
		if c.owner != "" && c.owner != me && live[c.owner] && !c.expired && c.asked == "" {
			byOwner[c.owner] = append(byOwner[c.owner], c)
		}
	}
	for len(ask) < steals && mine < share {
		owners := make([]string, 0, len(byOwner))
		for o := range byOwner {
			owners = append(owners, o)
		}
		slices.SortFunc(owners, func(a, b string) int {
			if d := cmp.Compare(counts[b], counts[a]); d != 0 {
				return d
			}
			return cmp.Compare(a, b)
		})
		if len(owners) == 0 || counts[owners[0]] < mine+2 || len(byOwner[owners[0]]) == 0 {
			break
		}
		o := owners[0]
		ask = append(ask, byOwner[o][0])
		byOwner[o] = byOwner[o][1:]
		if len(byOwner[o]) == 0 {
			delete(byOwner, o)
		}
		counts[o]--
		mine++
	}
	return take, ask
}

// planFree plans who takes the free (and expired) leases: in the order of
// their shard ids, each goes to the first instance with room (fewer than
// share, counts moved as the plan goes) in the shard's rendezvous order
// of the live instances and me; to nobody ("") when none has room. Every instance that scanned the same table
// makes the same plan, and one that scanned it after others took their
// part makes nearly the same: instances take disjoint leases, each up to
// its share, in one cycle, instead of racing for the same ones and
// trying again a cycle later.
func planFree(free []claim, counts map[string]int, live map[string]bool, me string, share int) []planned {
	ids := make([]string, 0, len(live)+1)
	for id := range live {
		ids = append(ids, id)
	}
	if !live[me] {
		ids = append(ids, me)
	}
	slices.SortFunc(free, func(a, b claim) int { return cmp.Compare(a.shard, b.shard) })
	plan := make([]planned, 0, len(free))
	order := make([]string, len(ids))
	hash := make(map[string]uint64, len(ids))
	for _, c := range free {
		for _, id := range ids {
			hash[id] = rendezvous(c.shard, id)
		}
		copy(order, ids)
		slices.SortFunc(order, func(a, b string) int {
			if d := cmp.Compare(hash[b], hash[a]); d != 0 {
				return d
			}
			return cmp.Compare(a, b)
		})
		to := ""
		for _, id := range order {
			if counts[id] < share {
				to = id
				counts[id]++
				break
			}
		}
		plan = append(plan, planned{claim: c, to: to})
	}
	return plan
}

func rendezvous(shard, instance string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(instance))
	h.Write([]byte{0})
	h.Write([]byte(shard))
	// FNV alone mixes too little for ids that differ in one character: the
	// finalizer of MurmurHash3 spreads every bit of it.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// withoutLapsed returns live without the instances (me aside) of which a
// lease expired: the plans give them nothing and count no share for them.
// Such an instance may still count as alive (its worker item moved within
// the lease period while a lease of its did not: one it took after its last
// heartbeat, just before it crashed), but it does not read that lease. With
// a share of its own and room to take, the expired leases were planned for
// it and waited, unread, until overdue or until it was known dead, a third
// of a lease period and more after they expired (TestLeasesSIGKILLTakeover:
// 1.65 lease periods). One that does live is counted again once no lease of
// its is expired, and the balance evens the counts then.
func withoutLapsed(live map[string]bool, claims []claim, me string) map[string]bool {
	var lapsed []string
	for _, c := range claims {
		if c.expired && c.owner != me && live[c.owner] {
			lapsed = append(lapsed, c.owner)
		}
	}
	if len(lapsed) == 0 {
		return live
	}
	out := maps.Clone(live)
	for _, id := range lapsed {
		delete(out, id)
	}
	return out
}
