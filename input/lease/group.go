package lease

import (
	"context"
	"errors"
	"regexp"
	"strings"
)

// Groups of pipelines share one table without meeting: each reads every
// record of a stream, shared among its own instances. The items of a named
// group hold, where other items hold the stream's ARN, the group's stream
// id "group/<name>/<stream ARN>": in their leaseKey and in streamArn, which
// a scan filters on. So a group sees only its own items, and the default
// group (no name) the items written before groups were, unchanged.

// GroupPattern is what a group's name may be; GroupExpected says so.
const (
	GroupPattern  = `^[a-zA-Z0-9_.-]{1,128}$`
	GroupExpected = "expected a group name: 1 to 128 of a-z, A-Z, 0-9, '_', '-', '.'"
)

var groupRE = regexp.MustCompile(GroupPattern)

// CheckGroup refuses a name that is not a group's.
func CheckGroup(name string) error {
	if !groupRE.MatchString(name) {
		return errors.New(GroupExpected)
	}
	return nil
}

// StreamID is the id of a stream's items in a group: its ARN in the
// default group (empty name), "group/<name>/<ARN>" in another.
func StreamID(group, streamARN string) string {
	if group == "" {
		return streamARN
	}
	return "group/" + group + "/" + streamARN
}

// GroupShardKey is the leaseKey of a shard's item in a group.
func GroupShardKey(group, streamARN, shardID string) string {
	return ShardKey(StreamID(group, streamARN), shardID)
}

// Grouped returns the part of store that belongs to group: the same
// methods, on the group's items only. The default group's part is store
// itself.
func Grouped(store Store, group string) Store {
	if group == "" {
		return store
	}
	return &grouped{st: store, prefix: StreamID(group, "")}
}

// grouped translates between stream ARNs, which its callers use, and the
// group's stream ids, which the store holds.
type grouped struct {
	st     Store
	prefix string
}

func (g *grouped) id(streamARN string) string { return g.prefix + streamARN }

func (g *grouped) arn(id string) string { return strings.TrimPrefix(id, g.prefix) }

func (g *grouped) in(s Shard) Shard { s.Stream = g.id(s.Stream); return s }

func (g *grouped) out(s Shard) Shard { s.Stream = g.arn(s.Stream); return s }

func (g *grouped) outScan(sc Scan, err error) (Scan, error) {
	if sc.Stream != nil {
		st := *sc.Stream
		st.ARN = g.arn(st.ARN)
		sc.Stream = &st
	}
	for i := range sc.Shards {
		sc.Shards[i] = g.out(sc.Shards[i])
	}
	return sc, err
}

func (g *grouped) Name() string { return g.st.Name() }

func (g *grouped) Scan(ctx context.Context, streamARN string) (Scan, error) {
	return g.outScan(g.st.Scan(ctx, g.id(streamARN)))
}

func (g *grouped) ScanConsistent(ctx context.Context, streamARN string) (Scan, error) {
	return g.outScan(g.st.ScanConsistent(ctx, g.id(streamARN)))
}

func (g *grouped) Get(ctx context.Context, streamARN, shardID string) (Shard, bool, error) {
	s, ok, err := g.st.Get(ctx, g.id(streamARN), shardID)
	return g.out(s), ok, err
}

func (g *grouped) Create(ctx context.Context, s Shard) (Shard, bool, error) {
	got, created, err := g.st.Create(ctx, g.in(s))
	return g.out(got), created, err
}

func (g *grouped) Announce(ctx context.Context, streamARN string, shardIDs []string) {
	g.st.Announce(ctx, g.id(streamARN), shardIDs)
}

func (g *grouped) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w Write) (Shard, error) {
	s, err := g.st.Hold(ctx, g.id(streamARN), shardID, me, counter, w)
	return g.out(s), err
}

func (g *grouped) Take(ctx context.Context, s Shard, me, nonce string) (Shard, error) {
	got, err := g.st.Take(ctx, g.in(s), me, nonce)
	return g.out(got), err
}

func (g *grouped) Ask(ctx context.Context, s Shard, me, nonce string) error {
	return g.st.Ask(ctx, g.in(s), me, nonce)
}

func (g *grouped) Withdraw(ctx context.Context, s Shard, me string) error {
	return g.st.Withdraw(ctx, g.in(s), me)
}

func (g *grouped) Delete(ctx context.Context, streamARN, shardID string) error {
	return g.st.Delete(ctx, g.id(streamARN), shardID)
}

func (g *grouped) Replace(ctx context.Context, s Shard, was string) error {
	return g.st.Replace(ctx, g.in(s), was)
}

func (g *grouped) Overwrite(ctx context.Context, s Shard, prev *Shard) error {
	if prev != nil {
		p := g.in(*prev)
		prev = &p
	}
	return g.st.Overwrite(ctx, g.in(s), prev)
}

func (g *grouped) ReplaceMalformed(ctx context.Context, was BrokenItem, s *Shard) error {
	if s != nil {
		in := g.in(*s)
		s = &in
	}
	return g.st.ReplaceMalformed(ctx, was, s)
}

func (g *grouped) PutStream(ctx context.Context, s Stream) (Stream, bool, error) {
	s.ARN = g.id(s.ARN)
	got, created, err := g.st.PutStream(ctx, s)
	got.ARN = g.arn(got.ARN)
	return got, created, err
}

func (g *grouped) ReplaceStream(ctx context.Context, s Stream) error {
	s.ARN = g.id(s.ARN)
	return g.st.ReplaceStream(ctx, s)
}

func (g *grouped) Heartbeat(ctx context.Context, streamARN, me string, p Presence, takeOver bool) error {
	return g.st.Heartbeat(ctx, g.id(streamARN), me, p, takeOver)
}

func (g *grouped) GetWorker(ctx context.Context, streamARN, id string) (Worker, bool, error) {
	return g.st.GetWorker(ctx, g.id(streamARN), id)
}

func (g *grouped) RemoveWorker(ctx context.Context, streamARN string, seen Worker) (bool, error) {
	return g.st.RemoveWorker(ctx, g.id(streamARN), seen)
}

func (g *grouped) Leave(ctx context.Context, streamARN, me string) error {
	return g.st.Leave(ctx, g.id(streamARN), me)
}

func (g *grouped) Poll(ctx context.Context, streamARN string) (Poll, error) {
	p, err := g.st.Poll(ctx, g.id(streamARN))
	if p.Stream != nil {
		st := *p.Stream
		st.ARN = g.arn(st.ARN)
		p.Stream = &st
	}
	return p, err
}

func (g *grouped) Beat(ctx context.Context, streamARN, me string, b Beat, takeOver bool) (Beat, error) {
	return g.st.Beat(ctx, g.id(streamARN), me, b, takeOver)
}

func (g *grouped) GetBeat(ctx context.Context, streamARN string, bucket int, id string) (Beat, bool, error) {
	return g.st.GetBeat(ctx, g.id(streamARN), bucket, id)
}

func (g *grouped) RemoveBeat(ctx context.Context, streamARN string, seen Beat) (bool, error) {
	return g.st.RemoveBeat(ctx, g.id(streamARN), seen)
}

func (g *grouped) LeaveRoster(ctx context.Context, streamARN, me string, bucket int) error {
	return g.st.LeaveRoster(ctx, g.id(streamARN), me, bucket)
}

func (g *grouped) ClaimRegistration(ctx context.Context, streamARN, consumer, me string) (bool, error) {
	return g.st.ClaimRegistration(ctx, g.id(streamARN), consumer, me)
}

func (g *grouped) DropRegistration(ctx context.Context, streamARN, consumer string) error {
	return g.st.DropRegistration(ctx, g.id(streamARN), consumer)
}
