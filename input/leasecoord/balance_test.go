package leasecoord

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func noShuffle([]claim) {}

// TestBalanceTakesItsShare: free and expired leases are taken up to the
// share, never more, unless overdue; leases asked for count as coming.
func TestBalanceTakesItsShare(t *testing.T) {
	var claims []claim
	for i := range 10 {
		claims = append(claims, claim{shard: fmt.Sprint(i)})
	}
	live := map[string]bool{"a": true, "b": true, "c": true}
	// The three plan alike: each takes a part of at most its share (4),
	// together every lease once.
	got := map[string]string{}
	for id := range live {
		take, ask := balance(id, claims, live, 4)
		if len(take) > 4 || len(ask) != 0 {
			t.Fatalf("10 free leases, 3 live instances: %s took %d, asked %d; want at most 4 (the share) and 0", id, len(take), len(ask))
		}
		for _, c := range take {
			if other, ok := got[c.shard]; ok {
				t.Fatalf("lease %s planned for %s and %s", c.shard, other, id)
			}
			got[c.shard] = id
		}
	}
	if len(got) != 10 {
		t.Fatalf("%d of 10 free leases planned", len(got))
	}
	// Leases another instance did not take for half a lease period are
	// overdue: whoever sees them takes them, beyond its share if need be
	// (the one they fell to may live and not read: its scans fail); the
	// balance evens the counts later.
	for i := range claims {
		claims[i].overdue = true
	}
	if take, _ := balance("a", claims, live, 4); len(take) != 10 {
		t.Fatalf("10 overdue leases: a took %d, want all 10", len(take))
	}

	// b holds 6, c 4 of which one expired: a takes the expired one, then
	// asks b for one (6 >= 1+2), and stops at its share of 4.
	claims = claims[:0]
	for i := range 6 {
		claims = append(claims, claim{shard: fmt.Sprint("b", i), owner: "b"})
	}
	for i := range 4 {
		claims = append(claims, claim{shard: fmt.Sprint("c", i), owner: "c", expired: i == 0})
	}
	take, ask := balance("a", claims, live, 4)
	if len(take) != 1 || take[0].shard != "c0" {
		t.Fatalf("took %v, want the expired lease c0", take)
	}
	if len(ask) != 2 {
		t.Fatalf("asked for %v, want two leases of b (6 and 5 against 1 and 2 held)", ask)
	}
	for _, c := range ask {
		if c.owner != "b" {
			t.Fatalf("asked %s, want only b, the most loaded", c.owner)
		}
	}

	// With its asks pending, a asks for no more.
	for i := range claims {
		for _, c := range ask {
			if claims[i].shard == c.shard {
				claims[i].asked = "a"
			}
		}
	}
	claims[6].owner, claims[6].expired = "a", false // the expired one, taken
	take, ask = balance("a", claims, live, 4)
	if len(take) != 0 || len(ask) != 0 {
		t.Fatalf("with its share coming: took %v, asked %v; want nothing", take, ask)
	}

	// steal_limit 0 never asks.
	if _, ask := balance("a", claims[:6], live, 0); len(ask) != 0 {
		t.Fatalf("steal_limit 0 asked for %v", ask)
	}
}

// TestBalanceCountsAnotherAsksAsItsAskers: 16 leases over 3 instances. a
// holds 12, of which b asked for 4 and c for 2; c holds 4. The leases c
// asked for are coming to c (6, its share): b asks a for one more, not
// two, and a keeps 5. Counted as a's, b asked for 2 and a was left with 4
// against 6 and 6, and would have asked one back (seen by
// TestLeasesShareAStream: i0 4, i1 6, i2 6 after both asked in turn).
func TestBalanceCountsAnotherAsksAsItsAskers(t *testing.T) {
	live := map[string]bool{"a": true, "b": true, "c": true}
	var claims []claim
	for i := range 12 {
		cl := claim{shard: fmt.Sprintf("a%02d", i), owner: "a"}
		switch {
		case i < 4:
			cl.asked = "b"
		case i < 6:
			cl.asked = "c"
		}
		claims = append(claims, cl)
	}
	for i := range 4 {
		claims = append(claims, claim{shard: fmt.Sprint("c", i), owner: "c"})
	}
	take, ask := balance("b", claims, live, 4)
	if len(take) != 0 || len(ask) != 1 || ask[0].owner != "a" {
		t.Fatalf("b took %v and asked for %v; want one lease of a (a keeps 5, c gets 6, b 5)", take, ask)
	}
	// An ask of an instance not known alive does not count: its leases
	// stay their holder's (it may never take them up).
	for i := range claims[:6] {
		claims[i].asked = "gone"
	}
	if _, ask := balance("b", claims, live, 4); len(ask) != 4 {
		t.Fatalf("with the asks of an instance not alive, b asked for %d; want 4 (a holds 12, b nothing)", len(ask))
	}
}

// TestBalanceConverges plays lease cycles of instances starting one after
// another on 16 and 1,024 shards: every shard ends held, the instances
// within one of each other, and no instance ever asks for more than
// steal_limit at once.
func TestBalanceConverges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ shards, instances, steals int }{{16, 3, 4}, {16, 3, 1}, {1024, 16, 4}, {7, 4, 2}} {
		t.Run(fmt.Sprintf("%d shards %d instances steal_limit %d", tc.shards, tc.instances, tc.steals), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			owner := make([]string, tc.shards)
			asked := make([]string, tc.shards)
			live := map[string]bool{}
			var ids []string
			cycles := 0
			for round := 0; round < 1000; round++ {
				if len(ids) < tc.instances && round%3 == 0 {
					id := fmt.Sprintf("i%02d", len(ids))
					ids = append(ids, id)
					live[id] = true
				}
				rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
				for _, me := range ids {
					var claims []claim
					for s := range owner {
						claims = append(claims, claim{shard: fmt.Sprint(s), owner: owner[s], asked: asked[s]})
					}
					take, ask := balance(me, claims, live, tc.steals)
					if len(ask) > tc.steals {
						t.Fatalf("%s asked for %d leases at once, steal_limit %d", me, len(ask), tc.steals)
					}
					for _, c := range take {
						s := index(c.shard)
						owner[s], asked[s] = me, ""
					}
					for _, c := range ask {
						asked[index(c.shard)] = me
					}
				}
				// Holders hand over what was asked of them.
				for s := range owner {
					if asked[s] != "" {
						owner[s], asked[s] = asked[s], ""
					}
				}
				cycles++
				if len(ids) == tc.instances && balanced(owner, ids) {
					break
				}
			}
			if !balanced(owner, ids) {
				t.Fatalf("not balanced after %d cycles: %v", cycles, counts(owner))
			}
			t.Logf("balanced after %d cycles: %v", cycles, counts(owner))
		})
	}
}

func index(shard string) int {
	var i int
	fmt.Sscan(shard, &i)
	return i
}

func counts(owner []string) map[string]int {
	n := map[string]int{}
	for _, o := range owner {
		n[o]++
	}
	return n
}

func balanced(owner []string, ids []string) bool {
	n := counts(owner)
	if n[""] > 0 {
		return false
	}
	var held []int
	for _, id := range ids {
		held = append(held, n[id])
	}
	return slices.Max(held)-slices.Min(held) <= 1
}

// TestFreeLeasesAreSplitWithoutRaces: 16 instances plan 1,024 free
// leases; each takes its share and no lease is planned for two of them,
// whether they scanned the table at once or half of them after the other
// half took their part (before, each took the shards it drew at random up
// to its share: about a third of the takes lost to another instance, and
// a few shards left over for cycle after cycle).
func TestFreeLeasesAreSplitWithoutRaces(t *testing.T) {
	t.Parallel()
	const shards, instances = 1024, 16
	live := map[string]bool{}
	var ids []string
	for i := range instances {
		id := fmt.Sprintf("i%02d", i)
		live[id], ids = true, append(ids, id)
	}
	for _, staggered := range []bool{false, true} {
		owner := map[string]string{}
		claims := func() []claim {
			var cl []claim
			for i := range shards {
				s := fmt.Sprintf("shardId-%012d", i)
				cl = append(cl, claim{shard: s, owner: owner[s]})
			}
			return cl
		}
		seen := claims()
		lost := 0
		for n, me := range ids {
			if staggered && n == instances/2 {
				seen = claims() // the second half scans after the first took
			}
			take, ask := balance(me, seen, live, 4)
			if len(ask) != 0 {
				t.Fatalf("%s asks for %d leases of a table of free ones", me, len(ask))
			}
			for _, c := range take {
				if owner[c.shard] != "" {
					lost++ // another instance took it first
					continue
				}
				owner[c.shard] = me
			}
		}
		held := map[string]int{}
		for _, o := range owner {
			held[o]++
		}
		for _, me := range ids {
			if held[me] != shards/instances {
				t.Fatalf("staggered %v: %s holds %d, want %d (%v); %d takes lost", staggered, me, held[me], shards/instances, held, lost)
			}
		}
		if lost != 0 {
			t.Fatalf("staggered %v: %d takes lost to another instance", staggered, lost)
		}
	}
}

// TestBalanceNeverPlansAnExpiredLeaseForItsHolder: c crashed right after
// taking two leases it had not listed in a heartbeat yet: they expire while
// c still counts as alive (its worker item moved within the lease period).
// Planned for c, they waited unread until overdue or until c was known
// dead, a third of a lease period and more (TestLeasesSIGKILLTakeover, 1.65
// lease periods). Whoever plans, by count or by load, plans them for a or
// b, and a and b together take all of them at once.
func TestBalanceNeverPlansAnExpiredLeaseForItsHolder(t *testing.T) {
	live := map[string]bool{"a": true, "b": true, "c": true}
	for _, byLoad := range []bool{false, true} {
		decide := balance
		if byLoad {
			decide = balanceLoad
		}
		var claims []claim
		for i := range 5 {
			claims = append(claims, claim{shard: fmt.Sprint("a", i), owner: "a", load: 1000, measured: byLoad})
			claims = append(claims, claim{shard: fmt.Sprint("b", i), owner: "b", load: 1000, measured: byLoad})
		}
		for i := range 6 {
			claims = append(claims, claim{shard: fmt.Sprint("c", i), owner: "c", expired: true, load: 1000, measured: byLoad})
		}
		taken := map[string]string{}
		for _, id := range []string{"a", "b"} {
			take, _ := decide(id, claims, live, 4)
			for _, c := range take {
				if other, ok := taken[c.shard]; ok {
					t.Fatalf("by load %v: %s planned for both %s and %s", byLoad, c.shard, other, id)
				}
				taken[c.shard] = id
			}
		}
		for i := range 6 {
			if id := fmt.Sprint("c", i); taken[id] == "" {
				t.Errorf("by load %v: the expired lease %s was taken by neither a nor b (planned for c, whose lease expired); taken: %v", byLoad, id, taken)
			}
		}
	}
}
