package leasecoord

// The lease table of the simulation: one lease.Memory, reached by each
// process through a simStore that gives every call a latency (it is
// applied somewhere between its sending and its answer), and fails it
// before or after it applied, as the process's faults of the moment say.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

var (
	errSimRefused = errors.New("sim: connection refused")
	errSimLost    = errors.New("sim: connection reset after the request was sent")
	errSimScan    = errors.New("sim: scan throttled (ProvisionedThroughputExceededException)")
)

// simTable is the table every process shares, and what the simulation
// learns from its writes.
type simTable struct {
	mem *lease.Memory
	// scans holds recent scan results (copies) and when each applied: an
	// eventually consistent scan may answer with one of them.
	scans []simScan
	// onApplied is told of each write that applied: the fleet's records.
	onApplied func(p *simProc, op string, before lease.Shard, after lease.Shard, w lease.Write)
}

type simScan struct {
	at time.Time
	sc lease.Scan
}

// simStore is the table as one process reaches it.
type simStore struct {
	t *simTable
	w *simWorld
	p *simProc
	// owed: an announcement failed, and is sent before the next poll (as
	// lease.Table does).
	owed bool
}

var _ lease.Store = (*simStore)(nil)

// call makes one call of op: it applies do at a time within its latency
// (unless it fails before), and answers at the end of it, or at the
// context's deadline, whichever comes first, as the faults of p at the
// time it was sent say. A call of a process down fails at once.
func simCall[T any](s *simStore, ctx context.Context, op string, do func() (T, error)) (T, error) {
	var zero T
	w, p := s.w, s.p
	if w.over || p.crashed {
		return zero, errSimDown
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	f := p.faultsAt(w.now)
	lat := f.latency(w.rng, p.fleet.period)
	answer := w.now.Add(lat)
	mode := f.mode(w.rng, op)
	var res T
	var err error
	if mode != simFailBefore {
		// Applied before the answer, and before any task's wake at the
		// same instant (its key sorts first).
		apply := w.now.Add(time.Duration(w.rng.Int64N(int64(lat))))
		w.at(apply, "", func() {
			res, err = do()
			p.fleet.trace(p, "%s sent at %.3fs applied: %v", op, answer.Add(-lat).Sub(simEpoch).Seconds(), err)
		})
	}
	p.fleet.trace(p, "%s sent, answered at %.3fs (mode %d)", op, answer.Sub(simEpoch).Seconds(), mode)
	wake := answer
	dl, has := simDeadline(ctx)
	timedOut := has && dl.Before(answer)
	if timedOut {
		wake = dl
	}
	w.park(p, wake)
	switch {
	case w.over || p.crashed:
		return zero, errSimDown
	case timedOut:
		return zero, fmt.Errorf("sim: %s: %w", op, context.DeadlineExceeded)
	case mode == simFailBefore:
		if op == "Scan" || op == "ScanConsistent" {
			return zero, errSimScan
		}
		return zero, errSimRefused
	case mode == simLoseAnswer:
		return zero, errSimLost
	}
	return res, err
}

func (s *simStore) Name() string { return "sim" }

func (s *simStore) Scan(ctx context.Context, streamARN string) (lease.Scan, error) {
	var at time.Time
	sc, err := simCall(s, ctx, "Scan", func() (lease.Scan, error) {
		if s.p.faultsAt(s.w.now).stale(s.w.rng) {
			if old, when, ok := s.t.staleScan(s.w.now, s.p.fleet.period/10); ok {
				at = when
				return old, nil
			}
		}
		at = s.w.now
		return s.t.scan(s.w.now, streamARN)
	})
	if err == nil {
		s.p.scannedAt = at
	}
	return sc, err
}

func (s *simStore) ScanConsistent(ctx context.Context, streamARN string) (lease.Scan, error) {
	var at time.Time
	sc, err := simCall(s, ctx, "ScanConsistent", func() (lease.Scan, error) {
		at = s.w.now
		return s.t.scan(s.w.now, streamARN)
	})
	if err == nil {
		s.p.scannedAt = at
	}
	return sc, err
}

// scan scans the table, and keeps a copy for stale answers.
func (t *simTable) scan(now time.Time, streamARN string) (lease.Scan, error) {
	sc, err := t.mem.Scan(context.Background(), streamARN)
	if err != nil {
		return sc, err
	}
	t.scans = append(t.scans, simScan{at: now, sc: copyScan(sc)})
	if len(t.scans) > 32 {
		t.scans = t.scans[len(t.scans)-32:]
	}
	return sc, nil
}

// staleScan returns a copy of a scan applied within staleness of now and
// before it, if there is one, and when it was applied.
func (t *simTable) staleScan(now time.Time, staleness time.Duration) (lease.Scan, time.Time, bool) {
	for _, old := range t.scans {
		if now.Sub(old.at) <= staleness && old.at.Before(now) {
			return copyScan(old.sc), old.at, true
		}
	}
	return lease.Scan{}, time.Time{}, false
}

func copyScan(sc lease.Scan) lease.Scan {
	out := sc
	out.Shards = append([]lease.Shard(nil), sc.Shards...)
	out.Workers = append([]lease.Worker(nil), sc.Workers...)
	out.Broken = append([]lease.BrokenItem(nil), sc.Broken...)
	return out
}

func (s *simStore) Get(ctx context.Context, streamARN, shardID string) (lease.Shard, bool, error) {
	type r struct {
		s  lease.Shard
		ok bool
	}
	got, err := simCall(s, ctx, "Get "+shardID, func() (r, error) {
		it, ok, err := s.t.mem.Get(context.Background(), streamARN, shardID)
		return r{it, ok}, err
	})
	return got.s, got.ok, err
}

func (s *simStore) Create(ctx context.Context, sh lease.Shard) (lease.Shard, bool, error) {
	type r struct {
		got     lease.Shard
		created bool
	}
	res, err := simCall(s, ctx, "Create", func() (r, error) {
		got, created, err := s.t.mem.Create(context.Background(), sh)
		s.t.onApplied(s.p, "Create", sh, got, lease.Write{})
		return r{got, created}, err
	})
	return res.got, res.created, err
}

// Announce is one call (the two writes of lease.Table's as one); one that
// failed, applied or not, is owed, and made before the next poll, naming
// no shard, as lease.Table's is.
func (s *simStore) Announce(ctx context.Context, streamARN string, shardIDs []string) {
	_, err := simCall(s, ctx, "Announce", func() (struct{}, error) {
		s.t.mem.Announce(context.Background(), streamARN, shardIDs)
		return struct{}{}, nil
	})
	s.owed = err != nil
}

func (s *simStore) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w lease.Write) (lease.Shard, error) {
	return simCall(s, ctx, "Hold "+shardID+" at counter "+strconv.FormatInt(counter, 10), func() (lease.Shard, error) {
		before, _ := s.t.mem.Peek(streamARN, shardID) // unbilled: the simulation's records
		after, err := s.t.mem.Hold(context.Background(), streamARN, shardID, me, counter, w)
		if err == nil {
			s.t.onApplied(s.p, "Hold", before, after, w)
		}
		return after, err
	})
}

func (s *simStore) Take(ctx context.Context, sh lease.Shard, me, nonce string) (lease.Shard, error) {
	return simCall(s, ctx, "Take "+sh.ShardID, func() (lease.Shard, error) {
		after, err := s.t.mem.Take(context.Background(), sh, me, nonce)
		if err == nil {
			s.t.onApplied(s.p, "Take", sh, after, lease.Write{})
		}
		return after, err
	})
}

func (s *simStore) Ask(ctx context.Context, sh lease.Shard, me, nonce string) error {
	_, err := simCall(s, ctx, "Ask "+sh.ShardID, func() (struct{}, error) {
		err := s.t.mem.Ask(context.Background(), sh, me, nonce)
		if err == nil {
			asked := sh
			asked.HandoffTo, asked.HandoffNonce = me, nonce
			s.t.onApplied(s.p, "Ask", sh, asked, lease.Write{})
		}
		return struct{}{}, err
	})
	return err
}

func (s *simStore) Withdraw(ctx context.Context, sh lease.Shard, me string) error {
	_, err := simCall(s, ctx, "Withdraw", func() (struct{}, error) {
		return struct{}{}, s.t.mem.Withdraw(context.Background(), sh, me)
	})
	return err
}

func (s *simStore) Delete(ctx context.Context, streamARN, shardID string) error {
	_, err := simCall(s, ctx, "Delete", func() (struct{}, error) {
		return struct{}{}, s.t.mem.Delete(context.Background(), streamARN, shardID)
	})
	return err
}

func (s *simStore) Replace(ctx context.Context, sh lease.Shard, was string) error {
	_, err := simCall(s, ctx, "Replace", func() (struct{}, error) {
		err := s.t.mem.Replace(context.Background(), sh, was)
		s.t.onApplied(s.p, "Replace", lease.Shard{}, sh, lease.Write{})
		return struct{}{}, err
	})
	return err
}

func (s *simStore) Overwrite(ctx context.Context, sh lease.Shard, prev *lease.Shard) error {
	_, err := simCall(s, ctx, "Overwrite", func() (struct{}, error) {
		return struct{}{}, s.t.mem.Overwrite(context.Background(), sh, prev)
	})
	return err
}

func (s *simStore) ReplaceMalformed(ctx context.Context, was lease.BrokenItem, sh *lease.Shard) error {
	_, err := simCall(s, ctx, "ReplaceMalformed", func() (struct{}, error) {
		return struct{}{}, s.t.mem.ReplaceMalformed(context.Background(), was, sh)
	})
	return err
}

func (s *simStore) PutStream(ctx context.Context, st lease.Stream) (lease.Stream, bool, error) {
	type r struct {
		st      lease.Stream
		created bool
	}
	got, err := simCall(s, ctx, "PutStream", func() (r, error) {
		st, created, err := s.t.mem.PutStream(context.Background(), st)
		return r{st, created}, err
	})
	return got.st, got.created, err
}

func (s *simStore) ReplaceStream(ctx context.Context, st lease.Stream) error {
	_, err := simCall(s, ctx, "ReplaceStream", func() (struct{}, error) {
		return struct{}{}, s.t.mem.ReplaceStream(context.Background(), st)
	})
	return err
}

func (s *simStore) Heartbeat(ctx context.Context, streamARN, me string, pr lease.Presence, takeOver bool) error {
	_, err := simCall(s, ctx, "Heartbeat", func() (struct{}, error) {
		return struct{}{}, s.t.mem.Heartbeat(context.Background(), streamARN, me, pr, takeOver)
	})
	return err
}

func (s *simStore) GetWorker(ctx context.Context, streamARN, id string) (lease.Worker, bool, error) {
	type r struct {
		w  lease.Worker
		ok bool
	}
	got, err := simCall(s, ctx, "GetWorker", func() (r, error) {
		w, ok, err := s.t.mem.GetWorker(context.Background(), streamARN, id)
		return r{w, ok}, err
	})
	return got.w, got.ok, err
}

func (s *simStore) RemoveWorker(ctx context.Context, streamARN string, seen lease.Worker) (bool, error) {
	return simCall(s, ctx, "RemoveWorker", func() (bool, error) {
		return s.t.mem.RemoveWorker(context.Background(), streamARN, seen)
	})
}

func (s *simStore) Leave(ctx context.Context, streamARN, me string) error {
	_, err := simCall(s, ctx, "Leave", func() (struct{}, error) {
		return struct{}{}, s.t.mem.Leave(context.Background(), streamARN, me)
	})
	return err
}

func (s *simStore) Poll(ctx context.Context, streamARN string) (lease.Poll, error) {
	if s.owed {
		s.Announce(ctx, streamARN, nil)
	}
	return simCall(s, ctx, "Poll", func() (lease.Poll, error) {
		return s.t.mem.Poll(context.Background(), streamARN)
	})
}

func (s *simStore) Beat(ctx context.Context, streamARN, me string, b lease.Beat, takeOver bool) (lease.Beat, error) {
	return simCall(s, ctx, "Beat", func() (lease.Beat, error) {
		return s.t.mem.Beat(context.Background(), streamARN, me, b, takeOver)
	})
}

func (s *simStore) GetBeat(ctx context.Context, streamARN string, bucket int, id string) (lease.Beat, bool, error) {
	type r struct {
		b  lease.Beat
		ok bool
	}
	got, err := simCall(s, ctx, "GetBeat", func() (r, error) {
		b, ok, err := s.t.mem.GetBeat(context.Background(), streamARN, bucket, id)
		return r{b, ok}, err
	})
	return got.b, got.ok, err
}

func (s *simStore) RemoveBeat(ctx context.Context, streamARN string, seen lease.Beat) (bool, error) {
	return simCall(s, ctx, "RemoveBeat", func() (bool, error) {
		return s.t.mem.RemoveBeat(context.Background(), streamARN, seen)
	})
}

func (s *simStore) LeaveRoster(ctx context.Context, streamARN, me string, bucket int) error {
	_, err := simCall(s, ctx, "LeaveRoster", func() (struct{}, error) {
		return struct{}{}, s.t.mem.LeaveRoster(context.Background(), streamARN, me, bucket)
	})
	return err
}

func (s *simStore) ClaimRegistration(ctx context.Context, streamARN, consumer, me string) (bool, error) {
	return simCall(s, ctx, "ClaimRegistration", func() (bool, error) {
		return s.t.mem.ClaimRegistration(context.Background(), streamARN, consumer, me)
	})
}

func (s *simStore) DropRegistration(ctx context.Context, streamARN, consumer string) error {
	_, err := simCall(s, ctx, "DropRegistration", func() (struct{}, error) {
		return struct{}{}, s.t.mem.DropRegistration(context.Background(), streamARN, consumer)
	})
	return err
}
