package leasecoord

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// rtLog collects hand-outs: every position of every shard handed out, by
// whom and when.
type rtLog struct {
	mu    sync.Mutex
	out   map[string]map[int][]string // shard -> position -> "who@t"
	start time.Time
}

func (l *rtLog) handOut(shard string, p int, who string) (dup string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.out[shard]
	if m == nil {
		m = map[int][]string{}
		l.out[shard] = m
	}
	at := fmt.Sprintf("%s@%v", who, time.Since(l.start).Round(time.Millisecond))
	if prev := m[p]; len(prev) > 0 {
		dup = fmt.Sprintf("shard %s position %d handed out by %v and again by %s", shard, p, prev, at)
	}
	m[p] = append(m[p], at)
	return dup
}

type rtInstance struct {
	c       *leaseCoordinator
	logs    *syncLog
	mu      sync.Mutex
	running map[string]bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// draining: Benthos stopped reading and waits for the acknowledgements
	// of what was handed out before it calls Close.
	draining    atomic.Bool
	outstanding atomic.Int64
}

// stop is the input's clean stop: readers end, then a commit and the
// release, each bounded by a lease period.
func (in *rtInstance) stop() {
	in.draining.Store(true)
	for end := time.Now().Add(5 * time.Second); in.outstanding.Load() > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond) // the last acknowledgements
	}
	in.cancel()
	in.wg.Wait()
	for _, step := range []func(context.Context) error{in.c.Commit, in.c.Release} {
		ctx, cancel := context.WithTimeout(context.Background(), in.c.period)
		_ = step(ctx)
		cancel()
	}
}

// TestLeasesFleetInRealTimeHandsNothingOutTwice: three instances, started one
// after the other, share six shards through lease.Memory (optionally
// behind writes that fail before or after applying). Readers hand out one
// position at a time and acknowledge it at once, so every handover settles
// at once; no instance crashes or pauses. Nothing may be handed out twice.
func TestLeasesFleetInRealTimeHandsNothingOutTwice(t *testing.T) {
	rate, _ := strconv.ParseFloat(os.Getenv("SIM_FAULTS"), 64)
	ackDelay, _ := time.ParseDuration(os.Getenv("SIM_ACKDELAY"))
	dur := 6 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SIM_DURATION")); err == nil {
		dur = d
	}
	const period = 600 * time.Millisecond
	m := lease.NewMemory()
	shards := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	infos := make([]coord.Shard, len(shards))
	for i, id := range shards {
		infos[i] = coord.Shard{ID: id, StartSeq: fmt.Sprint(i + 1)}
	}
	hl := &rtLog{out: map[string]map[int][]string{}, start: time.Now()}
	ctx, cancel := context.WithTimeout(t.Context(), dur)
	defer cancel()
	var dups []string
	var dmu sync.Mutex
	var wg sync.WaitGroup

	gctx := ctx
	startInstance := func(me string, seed uint64) *rtInstance {
		ctx, icancel := context.WithCancel(gctx)
		logs := &syncLog{}
		res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))))
		st := lease.Store(m)
		if rate > 0 {
			st = &flakyStore{Store: m, rng: rand.New(rand.NewPCG(seed, seed+1)), rate: rate}
		}
		lc := newLeaseCoordination(st, Options{InstanceID: me, LeasePeriod: period, StealLimit: 4})
		c := lc.stream(testStream(res), coord.NewPositions(checkpoint.Stream{}))
		var first coord.FirstPin
		var err error
		for ctx.Err() == nil {
			if first, err = c.Load(ctx); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for c.Pin(ctx, infos, first.Start, first.Due) != nil && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		in := &rtInstance{c: c, logs: logs, running: map[string]bool{}, cancel: icancel}
		wg := &in.wg
		reader := func(id string, g coord.Grant, rctx context.Context) {
			defer wg.Done()
			next := 1
			if p := g.Start().Position; p != nil {
				n, _ := strconv.Atoi(p.Sequence)
				next = n + 1
			}
			// The pipeline acknowledges in order, each after up to ackDelay.
			var pending sync.WaitGroup
			queue := make(chan int, 8)
			go func() {
				for n := range queue {
					if ackDelay > 0 {
						time.Sleep(time.Duration(rand.Int64N(int64(ackDelay))))
					}
					g.Acked(checkpoint.Position{Sequence: strconv.Itoa(n)})
					in.outstanding.Add(-1)
					pending.Done()
				}
			}()
			for rctx.Err() == nil && ctx.Err() == nil && !in.draining.Load() {
				if !time.Now().Before(g.Until()) {
					break // lapsed: the reader stops (errLapsed)
				}
				if d := hl.handOut(id, next, me); d != "" {
					dmu.Lock()
					dups = append(dups, d)
					dmu.Unlock()
				}
				pending.Add(1)
				in.outstanding.Add(1)
				queue <- next
				next++
				time.Sleep(5 * time.Millisecond)
			}
			close(queue)
			g.Stopped(ctx, func(sctx context.Context) error {
				done := make(chan struct{})
				go func() { pending.Wait(); close(done) }()
				select {
				case <-done:
					return nil
				case <-sctx.Done():
					return sctx.Err()
				}
			})
			in.mu.Lock()
			delete(in.running, id)
			in.mu.Unlock()
		}
		schedule := func() {
			for _, id := range shards {
				in.mu.Lock()
				busy := in.running[id]
				in.mu.Unlock()
				if busy {
					continue
				}
				rctx, rcancel := context.WithCancelCause(ctx)
				g, ok := c.Acquire(id, rcancel)
				if !ok {
					rcancel(nil)
					continue
				}
				in.mu.Lock()
				in.running[id] = true
				in.mu.Unlock()
				wg.Add(1)
				go reader(id, g, rctx)
			}
		}
		wg.Add(2)
		go func() { // commit loop
			defer wg.Done()
			tk := time.NewTicker(period / 6)
			defer tk.Stop()
			for ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-tk.C:
					_ = c.Commit(ctx)
				}
			}
		}()
		go func() { // run loop: cycles and schedules
			defer wg.Done()
			cycle := time.NewTimer(0)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-cycle.C:
					cycle.Reset(c.Cycle(ctx, everyShard))
				case <-c.Changed():
				case <-tick.C:
				}
				schedule()
			}
		}()
		return in
	}

	var fleet, all []*rtInstance
	for i, me := range []string{"a", "b", "c"} {
		in := startInstance(me, uint64(i+1))
		fleet, all = append(fleet, in), append(all, in)
		time.Sleep(period)
	}
	// Rolling restarts: every so often one instance stops cleanly and a new
	// one takes its place.
	restartEvery, _ := time.ParseDuration(os.Getenv("SIM_RESTART"))
	for n := 0; restartEvery > 0; n++ {
		select {
		case <-ctx.Done():
		case <-time.After(restartEvery):
		}
		if ctx.Err() != nil {
			break
		}
		i := n % len(fleet)
		fleet[i].stop()
		if ctx.Err() != nil {
			break
		}
		in := startInstance(fmt.Sprintf("r%d", n), uint64(100+n))
		fleet[i], all = in, append(all, in)
	}
	<-ctx.Done()
	for _, in := range all {
		in.wg.Wait()
	}
	wg.Wait()
	moves := 0
	for _, in := range all {
		moves += strings.Count(in.logs.String(), "handed its lease over")
	}
	t.Logf("handovers: %d; items: %+v", moves, m.Items())
	if len(dups) > 0 {
		for _, in := range all {
			for _, l := range strings.Split(in.logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "took its lease") || strings.Contains(l, "handed its lease") {
					t.Logf("%s: %s", in.c.me, l)
				}
			}
		}
		n := len(dups)
		if n > 20 {
			dups = dups[:20]
		}
		t.Fatalf("%d positions handed out twice, e.g.:\n%s", n, strings.Join(dups, "\n"))
	}
}
