package read

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAckTrackerModel drives the tracker with random Track, Grow, Ack
// and nack steps and compares it after each step with a plain model: batches
// in read order, the checkpoint at the end of the longest resolved-ok prefix
// (never past a nack), behind the records read past it, entries the
// undetached unpopped entries, and never two acknowledged entries side by
// side.
func TestAckTrackerModel(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := newAckTracker(1 << 30)
		type batch struct {
			e      *tracked
			end, n int
			state  int // 0 open (may grow), 1 handed out, 2 acked, 3 nacked
		}
		var bs []*batch
		seq := 0
		wantCP := 0
		for step := 0; step < 400; step++ {
			switch k := rng.IntN(10); {
			case k < 4: // track a new batch; the previous open one is handed out
				for _, b := range bs {
					if b.state == 0 {
						b.state = 1
					}
				}
				n := 1 + rng.IntN(3)
				seq += n
				e, err := tr.Track(context.Background(), pos(seq), n)
				if err != nil {
					t.Fatal(err)
				}
				bs = append(bs, &batch{e: e, end: seq, n: n})
			case k < 5: // grow the open batch
				for _, b := range bs {
					if b.state == 0 {
						n := 1 + rng.IntN(3)
						seq += n
						if !tr.Grow(b.e, pos(seq), n) {
							t.Fatalf("seed %d: grow refused", seed)
						}
						b.end, b.n = seq, b.n+n
					}
				}
			default: // resolve a random handed-out batch
				var open []*batch
				for _, b := range bs {
					if b.state == 1 {
						open = append(open, b)
					}
				}
				if len(open) == 0 {
					continue
				}
				b := open[rng.IntN(len(open))]
				var err error
				if rng.IntN(40) == 0 {
					err = errors.New("nack")
					b.state = 3
				} else {
					b.state = 2
				}
				tr.Ack(b.e, err)
			}
			// Model.
			for _, b := range bs {
				if b.state != 2 {
					break
				}
				wantCP = b.end
			}
			behind := seq - wantCP
			pending := 0
			for _, b := range bs {
				if b.state <= 1 {
					pending += b.n
				}
			}
			gotCP := 0
			if cp := tr.Checkpoint(); cp != nil {
				gotCP, _ = strconv.Atoi(cp.Sequence)
			}
			if gotCP != wantCP {
				t.Fatalf("seed %d step %d: checkpoint %d, want %d", seed, step, gotCP, wantCP)
			}
			if tr.Behind() != behind {
				t.Fatalf("seed %d step %d: behind %d, want %d", seed, step, tr.Behind(), behind)
			}
			if tr.pending != pending {
				t.Fatalf("seed %d step %d: pending %d, want %d", seed, step, tr.pending, pending)
			}
			cnt := 0
			var prev *tracked
			for q := tr.queue.head; q != nil; q = q.next {
				if q.prev != prev {
					t.Fatalf("seed %d step %d: broken prev link", seed, step)
				}
				if prev != nil && prev.acked && q.acked {
					t.Fatalf("seed %d step %d: two acknowledged entries side by side", seed, step)
				}
				if q.detached {
					t.Fatalf("seed %d step %d: detached entry in the list", seed, step)
				}
				prev = q
				cnt++
			}
			if prev != tr.queue.tail {
				t.Fatalf("seed %d step %d: tail is not the last entry", seed, step)
			}
			if cnt != tr.queue.entries {
				t.Fatalf("seed %d step %d: entries %d, list holds %d", seed, step, tr.queue.entries, cnt)
			}
		}
	}
}
