package leasecoord

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// claim is a readable shard's lease as the balance sees it.
type claim struct {
	shard   string
	owner   string // "" when free
	expired bool   // the owner did not renew it for a lease period
	asked   string // the instance that asked its owner for it, if any
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
//     share (the readable leases divided by the live instances, rounded up);
//   - then, while it still holds fewer than its share, up to steals leases of
//     the instances that hold at least two more than it does (the most loaded
//     first), one lease per instance and ask.
//
// live holds the instances known to be alive (me among them); claims held by
// instances not in live count as theirs while not expired. order shuffles the
// free leases so that instances starting together take different ones.
func balance(me string, claims []claim, live map[string]bool, steals int, order func([]claim)) (take, ask []claim) {
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
		default:
			counts[c.owner]++
			if c.asked == me {
				counts[me]++ // asked already: counted as coming
				counts[c.owner]--
			}
		}
	}
	share := (len(claims) + len(counts) - 1) / len(counts)
	mine := counts[me]
	order(free)
	for _, c := range free {
		if mine >= share {
			break
		}
		take = append(take, c)
		mine++
	}
	if mine >= share || steals <= 0 {
		return take, ask
	}
	// Ask the most loaded holders, one lease each per round.
	byOwner := map[string][]claim{}
	for _, c := range claims {
		if c.owner != "" && c.owner != me && !c.expired && c.asked == "" {
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

// preferOwn returns the order in which me takes free leases: by the rank
// of me in each shard's rendezvous order of the live instances (the
// instances sorted by their hash with the shard, highest first), shuffled
// within a rank. Instances that see the same live instances put disjoint
// sets of free leases first (the shards that fall to each one), and where
// one stops at its share, the shards it leaves go next to the instance
// ranked second for them: a fleet starting together splits the shards in
// one cycle instead of racing for the same ones.
func preferOwn(me string, live map[string]bool, shuffle func([]claim)) func([]claim) {
	ids := make([]string, 0, len(live)+1)
	for id := range live {
		ids = append(ids, id)
	}
	if !live[me] {
		ids = append(ids, me)
	}
	return func(cl []claim) {
		shuffle(cl)
		rank := make(map[string]int, len(cl))
		for _, c := range cl {
			rank[c.shard] = rankOf(c.shard, me, ids)
		}
		slices.SortStableFunc(cl, func(a, b claim) int { return cmp.Compare(rank[a.shard], rank[b.shard]) })
	}
}

// rankOf is the place of me in a shard's rendezvous order of ids: 0 when
// the shard falls to me, 1 when me comes second, and so on.
func rankOf(shard, me string, ids []string) int {
	mine := rendezvous(shard, me)
	rank := 0
	for _, id := range ids {
		if h := rendezvous(shard, id); id != me && (h > mine || (h == mine && id < me)) {
			rank++
		}
	}
	return rank
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
