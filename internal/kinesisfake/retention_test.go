package kinesisfake

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestTrimShardGetShardIterator: after TrimShard, TRIM_HORIZON and
// AT_TIMESTAMP start at the oldest record left, an iterator made before the
// trim goes on from there, and a sequence number past the horizon is an
// InvalidArgumentException naming the StartingSequenceNumber.
func TestTrimShardGetShardIterator(t *testing.T) {
	s := newServer(t, Stream("s", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	const shard = "shardId-000000000000"
	must(t, s.PutToShard("s", shard, 6, func(i int) []byte { return []byte(fmt.Sprint(i)) }))
	recs, err := s.ShardRecords("s", shard)
	must(t, err)
	shards, _ := s.Shards("s")
	start := *shards[0].SequenceNumberRange.StartingSequenceNumber
	iter := func(typ types.ShardIteratorType, seq *string, ts *time.Time) (*string, error) {
		out, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: typ, StartingSequenceNumber: seq, Timestamp: ts})
		if err != nil {
			return nil, err
		}
		return out.ShardIterator, nil
	}
	before, err := iter(types.ShardIteratorTypeTrimHorizon, nil, nil)
	must(t, err)

	n, err := s.TrimShard("s", shard, 3)
	must(t, err)
	if n != 3 {
		t.Fatalf("TrimShard removed %d records, want 3", n)
	}
	left, err := s.ShardRecords("s", shard)
	must(t, err)
	if len(left) != 3 || string(left[0].Data) != "3" {
		t.Fatalf("records left after the trim: %d, the first %q", len(left), left[0].Data)
	}
	if got := strings.Join(readAll(t, c, before), " "); got != "3 4 5" {
		t.Fatalf("an iterator made before the trim read %q, want the records left", got)
	}

	for _, tc := range []struct {
		name string
		typ  types.ShardIteratorType
		seq  *string
		ts   *time.Time
		want string
	}{
		{"trim horizon", types.ShardIteratorTypeTrimHorizon, nil, nil, "3 4 5"},
		{"at timestamp before all", types.ShardIteratorTypeAtTimestamp, nil, aws.Time(time.Unix(1, 0)), "3 4 5"},
		{"at the oldest left", types.ShardIteratorTypeAtSequenceNumber, recs[3].SequenceNumber, nil, "3 4 5"},
		{"after the newest trimmed", types.ShardIteratorTypeAfterSequenceNumber, recs[2].SequenceNumber, nil, "3 4 5"},
		{"after one left", types.ShardIteratorTypeAfterSequenceNumber, recs[4].SequenceNumber, nil, "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, err := iter(tc.typ, tc.seq, tc.ts)
			must(t, err)
			if got := strings.Join(readAll(t, c, it), " "); got != tc.want {
				t.Fatalf("read %q, want %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		typ  types.ShardIteratorType
		seq  string
	}{
		{"at the newest trimmed", types.ShardIteratorTypeAtSequenceNumber, *recs[2].SequenceNumber},
		{"after a trimmed one", types.ShardIteratorTypeAfterSequenceNumber, *recs[1].SequenceNumber},
		{"at the first trimmed", types.ShardIteratorTypeAtSequenceNumber, *recs[0].SequenceNumber},
		{"after the shard's start", types.ShardIteratorTypeAfterSequenceNumber, start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := iter(tc.typ, aws.String(tc.seq), nil)
			wantCode(t, err, CodeInvalidArgument)
			if msg := err.Error(); !strings.Contains(msg, "StartingSequenceNumber "+tc.seq) || !strings.Contains(msg, "retention") {
				t.Fatalf("the error does not name the StartingSequenceNumber and the retention period: %v", err)
			}
		})
	}

	// Trimming everything leaves an empty shard that new records fill.
	n, err = s.TrimShard("s", shard, 100)
	must(t, err)
	if n != 3 {
		t.Fatalf("TrimShard of everything removed %d records, want the 3 left", n)
	}
	it, err := iter(types.ShardIteratorTypeTrimHorizon, nil, nil)
	must(t, err)
	if got := readAll(t, c, it); len(got) != 0 {
		t.Fatalf("read %q from a shard trimmed empty", got)
	}
	must(t, s.PutToShard("s", shard, 1, func(int) []byte { return []byte("6") }))
	it, err = iter(types.ShardIteratorTypeTrimHorizon, nil, nil)
	must(t, err)
	if got := strings.Join(readAll(t, c, it), " "); got != "6" {
		t.Fatalf("read %q after a put to a shard trimmed empty, want 6", got)
	}

	if _, err := s.TrimShard("s", "shardId-000000000009", 1); err == nil || !strings.HasPrefix(err.Error(), CodeResourceNotFound) {
		t.Fatalf("TrimShard of an unknown shard: %v", err)
	}
}

// TestTrimShardSubscribe: SubscribeToShard refuses a sequence number past the
// horizon with InvalidArgumentException, TRIM_HORIZON starts at the oldest
// record left, and a subscription at the horizon with nothing left before it
// reports a continuation it can resume from.
func TestTrimShardSubscribe(t *testing.T) {
	s := newServer(t, Stream("s", 1), SubscriptionHeartbeat(50*time.Millisecond), SubscribeTakeoverWindow(0), Quotas(false))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	const shard = "shardId-000000000000"
	must(t, s.PutToShard("s", shard, 6, func(i int) []byte { return []byte(fmt.Sprint(i)) }))
	recs, err := s.ShardRecords("s", shard)
	must(t, err)
	_, err = s.TrimShard("s", shard, 4)
	must(t, err)

	for _, pos := range []types.StartingPosition{
		afterSeq(*recs[1].SequenceNumber),
		{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: recs[3].SequenceNumber},
	} {
		_, err := subscribe(t, c, arn, shard, pos)
		wantCode(t, err, CodeInvalidArgument)
		if msg := err.Error(); !strings.Contains(msg, "StartingSequenceNumber "+*pos.SequenceNumber) || !strings.Contains(msg, "SubscribeToShard") {
			t.Fatalf("the error does not name the StartingSequenceNumber and the call: %v", err)
		}
	}
	for _, pos := range []types.StartingPosition{trimHorizon(), afterSeq(*recs[3].SequenceNumber)} {
		es, err := subscribe(t, c, arn, shard, pos)
		must(t, err)
		ev, _ := nextEvent(t, es, 2*time.Second)
		if got := strings.Join(eventData(ev), " "); got != "4 5" {
			t.Fatalf("subscribed from %s: read %q, want 4 5", pos.Type, got)
		}
		es.Close()
	}

	_, err = s.TrimShard("s", shard, 2)
	must(t, err)
	es, err := subscribe(t, c, arn, shard, trimHorizon())
	must(t, err)
	ev, _ := nextEvent(t, es, 2*time.Second)
	cont := aws.ToString(ev.ContinuationSequenceNumber)
	if len(ev.Records) != 0 || cont != *recs[5].SequenceNumber {
		t.Fatalf("a subscription to a shard trimmed empty got %v, continuation %s; want no records and the newest trimmed record's number", eventData(ev), cont)
	}
	es.Close()
	must(t, s.PutToShard("s", shard, 1, func(int) []byte { return []byte("6") }))
	es, err = subscribe(t, c, arn, shard, afterSeq(cont))
	must(t, err)
	ev, _ = nextEvent(t, es, 2*time.Second)
	if got := strings.Join(eventData(ev), " "); got != "6" {
		t.Fatalf("resumed after the horizon's continuation: read %q, want 6", got)
	}
}
