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

// The SDK reads SubscribeToShard end to end over each transport the fake
// serves: HTTP/1.1, HTTP/2 over TLS (as AWS) and h2c.
func TestSubscribeEndToEnd(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name      string
		opts      []Opt
		client    func(s *Server) *protoClient
		wantProto string
	}{
		{"http1", nil, func(s *Server) *protoClient { return &protoClient{hc: s.HTTPClient()} }, "HTTP/1.1"},
		{"tls-h2", []Opt{TLS()}, func(s *Server) *protoClient { return &protoClient{hc: s.HTTPClient()} }, "HTTP/2.0"},
		{"h2c", nil, func(s *Server) *protoClient { return &protoClient{hc: h2cClient(t)} }, "HTTP/2.0"},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := newServer(t, append(m.opts, Stream("s", 2), ConsumerActivationDelay(50*time.Millisecond), SubscriptionHeartbeat(5*time.Second))...)
			pc := m.client(s)
			c := newClient(s, func(o *kinesis.Options) { o.HTTPClient = pc })
			ctx := testCtx(t)
			reg, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s")), ConsumerName: aws.String("app")})
			must(t, err)
			if reg.Consumer.ConsumerStatus != types.ConsumerStatusCreating {
				t.Fatalf("new consumer is %s", reg.Consumer.ConsumerStatus)
			}
			arn := *reg.Consumer.ConsumerARN
			waitActive(t, c, arn)

			const shard = "shardId-000000000000"
			var seqs []string
			for i := range 3 {
				_, seq, err := s.PutWithHashKey("s", "1", "k", []byte(fmt.Sprint(i)))
				must(t, err)
				seqs = append(seqs, seq)
			}
			es, err := subscribe(t, c, arn, shard, trimHorizon())
			must(t, err)
			ev, _ := nextEvent(t, es, 5*time.Second)
			if strings.Join(eventData(ev), " ") != "0 1 2" || *ev.ContinuationSequenceNumber != seqs[2] || *ev.MillisBehindLatest != 0 {
				t.Fatalf("first event %v cont %s", eventData(ev), *ev.ContinuationSequenceNumber)
			}
			r := ev.Records[0]
			if *r.PartitionKey != "k" || *r.SequenceNumber != seqs[0] || r.ApproximateArrivalTimestamp == nil {
				t.Fatalf("record %+v", r)
			}

			// Records put later are pushed at once, well before a heartbeat.
			start := time.Now()
			_, seq, err := s.PutWithHashKey("s", "1", "k", []byte("3"))
			must(t, err)
			ev, _ = nextEvent(t, es, 5*time.Second)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("record pushed after %v", d)
			}
			if strings.Join(eventData(ev), " ") != "3" || *ev.ContinuationSequenceNumber != seq {
				t.Fatalf("second event %v", eventData(ev))
			}
			if got := pc.seen(); got[m.wantProto] == 0 || len(got) != 1 {
				t.Fatalf("protocols used %v, want only %s", got, m.wantProto)
			}
			if s.Subscriptions() != 1 {
				t.Fatalf("%d subscriptions", s.Subscriptions())
			}
			es.Close()
			waitFor(t, "subscription to end", 5*time.Second, func() bool { return s.Subscriptions() == 0 })
		})
	}
}

func TestSubscribeHeartbeatAndContinuation(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 1), SubscriptionHeartbeat(100*time.Millisecond), SubscribeTakeoverWindow(0), Quotas(false))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	const shard = "shardId-000000000000"
	shards, _ := s.Shards("s")
	start := *shards[0].SequenceNumberRange.StartingSequenceNumber

	// began is taken before the subscribe, so that the server's heartbeat
	// timer, started once the initial-response is sent, cannot have started
	// before it: 3 heartbeats take at least 300 ms from began, however long
	// the subscribe takes to return.
	began := time.Now()
	es, err := subscribe(t, c, arn, shard, types.StartingPosition{Type: types.ShardIteratorTypeLatest})
	must(t, err)
	for range 3 {
		ev, _ := nextEvent(t, es, 2*time.Second)
		if len(ev.Records) != 0 || ev.ContinuationSequenceNumber == nil || *ev.ContinuationSequenceNumber != start {
			t.Fatalf("heartbeat %v cont %v", eventData(ev), aws.ToString(ev.ContinuationSequenceNumber))
		}
	}
	if d := time.Since(began); d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("3 heartbeats of 100 ms took %v", d)
	}
	// The continuation of an empty event resumes without loss: a record
	// put while nobody is subscribed is read after resubscribing with it.
	es.Close()
	_, awaySeq, err := s.Put("s", "k", []byte("while away"))
	must(t, err)
	es, err = subscribe(t, c, arn, shard, afterSeq(start))
	must(t, err)
	ev, _ := nextEvent(t, es, 2*time.Second)
	if strings.Join(eventData(ev), " ") != "while away" {
		t.Fatalf("after resubscribe: %v", eventData(ev))
	}
	// Heartbeats after records carry the last record's number.
	ev, _ = nextEvent(t, es, 2*time.Second)
	if len(ev.Records) != 0 || *ev.ContinuationSequenceNumber != awaySeq {
		t.Fatalf("heartbeat after a record: %v", eventData(ev))
	}
}

func TestSubscribeEventBoundsAndResume(t *testing.T) {
	s := newServer(t, Stream("s", 1), MaxEventRecords(3), SubscribeTakeoverWindow(0), Quotas(false))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	const shard = "shardId-000000000000"
	must(t, s.PutToShard("s", shard, 10, func(i int) []byte { return []byte(fmt.Sprint(i)) }))
	recs, _ := s.ShardRecords("s", shard)

	es, err := subscribe(t, c, arn, shard, trimHorizon())
	must(t, err)
	var sizes []int
	var cont string
	for len(sizes) < 2 {
		ev, _ := nextEvent(t, es, 2*time.Second)
		sizes = append(sizes, len(ev.Records))
		cont = *ev.ContinuationSequenceNumber
	}
	if fmt.Sprint(sizes) != "[3 3]" || cont != *recs[5].SequenceNumber {
		t.Fatalf("event sizes %v, continuation %s", sizes, cont)
	}
	es.Close()
	// AFTER_SEQUENCE_NUMBER with the continuation resumes exactly after the
	// last record delivered.
	es, err = subscribe(t, c, arn, shard, afterSeq(cont))
	must(t, err)
	var got []string
	for len(got) < 4 {
		ev, _ := nextEvent(t, es, 2*time.Second)
		got = append(got, eventData(ev)...)
	}
	if strings.Join(got, " ") != "6 7 8 9" {
		t.Fatalf("resumed with %v", got)
	}
	es.Close()

	// The other starting positions.
	for _, tc := range []struct {
		name string
		pos  types.StartingPosition
		want string
	}{
		{"at sequence", types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: recs[8].SequenceNumber}, "8 9"},
		{"at timestamp", types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(recs[0].ApproximateArrivalTimestamp.Add(-time.Second))}, "0 1 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := subscribe(t, c, arn, shard, tc.pos)
			must(t, err)
			ev, _ := nextEvent(t, es, 2*time.Second)
			if strings.Join(eventData(ev), " ") != tc.want {
				t.Fatalf("got %v, want %s", eventData(ev), tc.want)
			}
			es.Close()
		})
	}
}

func TestSubscribeLifetime(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 1), SubscriptionLifetime(300*time.Millisecond), SubscriptionHeartbeat(50*time.Millisecond))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	// start is taken before the subscribe: the lifetime timer starts on the
	// server after that, so the stream cannot end sooner than 300 ms after
	// start, however long the subscribe takes to return.
	start := time.Now()
	es, err := subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	must(t, err)
	if err := waitEnd(t, es, 5*time.Second); err != nil {
		t.Fatalf("stream ended with %v, want a clean end", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("ended after %v", d)
	}
	waitFor(t, "subscription to end", 5*time.Second, func() bool { return s.Subscriptions() == 0 })
}

func TestSubscribeShardEnd(t *testing.T) {
	for _, withRecords := range []bool{true, false} {
		t.Run(fmt.Sprintf("ShardEndWithRecords=%v", withRecords), func(t *testing.T) {
			s := newServer(t, TLS(), Stream("s", 1), ShardEndWithRecords(withRecords))
			c := newClient(s)
			arn, err := s.RegisterConsumer("s", "app")
			must(t, err)
			_, _, err = s.Put("s", "k", []byte("last"))
			must(t, err)
			kids, err := s.SplitShard("s", "shardId-000000000000", "")
			must(t, err)
			es, err := subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
			must(t, err)
			ev, _ := nextEvent(t, es, 2*time.Second)
			if strings.Join(eventData(ev), " ") != "last" {
				t.Fatalf("first event %v", eventData(ev))
			}
			if !withRecords {
				if ev.ContinuationSequenceNumber == nil || ev.ChildShards != nil {
					t.Fatalf("records event carries the end")
				}
				ev, _ = nextEvent(t, es, 2*time.Second)
				if len(ev.Records) != 0 {
					t.Fatalf("end event has records")
				}
			}
			if ev.ContinuationSequenceNumber != nil || len(ev.ChildShards) != 2 || *ev.ChildShards[0].ShardId != kids[0] ||
				ev.ChildShards[1].ParentShards[0] != "shardId-000000000000" {
				t.Fatalf("end event: cont %v children %+v", ev.ContinuationSequenceNumber, ev.ChildShards)
			}
			if err := waitEnd(t, es, 2*time.Second); err != nil {
				t.Fatalf("stream after shard end: %v", err)
			}
		})
	}
}

func TestSubscribeTakeover(t *testing.T) {
	// The takeover window is measured on the fake's clock, which stands
	// still until the test moves it on: the second subscribe is inside the
	// window however slow the first was.
	clock := newFakeClock()
	s := newServer(t, TLS(), Stream("s", 1), SubscribeTakeoverWindow(300*time.Millisecond), Quotas(false), withClock(clock))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	const shard = "shardId-000000000000"
	first, err := subscribe(t, c, arn, shard, trimHorizon())
	must(t, err)
	_, err = subscribe(t, c, arn, shard, trimHorizon())
	wantCode(t, err, CodeResourceInUse)
	clock.advance(290 * time.Millisecond)
	_, err = subscribe(t, c, arn, shard, trimHorizon())
	wantCode(t, err, CodeResourceInUse)
	clock.advance(60 * time.Millisecond) // 350 ms after the first
	second, err := subscribe(t, c, arn, shard, trimHorizon())
	must(t, err)
	wantCode(t, waitEnd(t, first, 2*time.Second), CodeResourceInUse)
	_, _, err = s.Put("s", "k", []byte("x"))
	must(t, err)
	ev, _ := nextEvent(t, second, 2*time.Second)
	if strings.Join(eventData(ev), " ") != "x" {
		t.Fatalf("new subscription got %v", eventData(ev))
	}
}

func TestSubscribeErrors(t *testing.T) {
	s := newServer(t, Stream("s", 2), Stream("other", 1), ConsumerActivationDelay(time.Hour), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	active, err := s.RegisterConsumer("s", "active")
	must(t, err)
	reg, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s")), ConsumerName: aws.String("creating")})
	must(t, err)
	_, otherSeq, err := s.Put("other", "k", []byte("x"))
	must(t, err)

	cases := []struct {
		name  string
		arn   string
		shard string
		pos   types.StartingPosition
		code  string
	}{
		{"creating consumer", *reg.Consumer.ConsumerARN, "shardId-000000000000", trimHorizon(), CodeResourceInUse},
		{"unknown consumer", s.StreamARN("s") + "/consumer/ghost:1700000000", "shardId-000000000000", trimHorizon(), CodeResourceNotFound},
		{"not an arn", "ghost", "shardId-000000000000", trimHorizon(), CodeInvalidArgument},
		{"unknown shard", active, "shardId-000000000007", trimHorizon(), CodeResourceNotFound},
		{"sequence of another stream", active, "shardId-000000000000", afterSeq(otherSeq), CodeInvalidArgument},
		{"bad type", active, "shardId-000000000000", types.StartingPosition{Type: "NOW"}, CodeValidation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := subscribe(t, c, tc.arn, tc.shard, tc.pos)
			wantCode(t, err, tc.code)
		})
	}
	if s.Subscriptions() != 0 {
		t.Fatalf("%d subscriptions after failures", s.Subscriptions())
	}
}

func TestSubscribeEndsWhenConsumerOrStreamGoes(t *testing.T) {
	s := newServer(t, TLS(), Stream("s", 1), Stream("t", 1), ConsumerDeletionDelay(time.Hour), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	es, err := subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	must(t, err)
	_, err = c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)})
	must(t, err)
	wantCode(t, waitEnd(t, es, 2*time.Second), CodeResourceNotFound)
	// DELETING: not ACTIVE.
	_, err = subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	wantCode(t, err, CodeResourceInUse)

	arn, err = s.RegisterConsumer("t", "app")
	must(t, err)
	es, err = subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	must(t, err)
	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("t"), EnforceConsumerDeletion: aws.Bool(true)})
	must(t, err)
	wantCode(t, waitEnd(t, es, 2*time.Second), CodeResourceNotFound)
	_, err = subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	wantCode(t, err, CodeResourceNotFound)
}

func TestSubscribeReadRateQuota(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 1))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	blob := make([]byte, 1<<20-2)
	must(t, s.PutToShard("s", "shardId-000000000000", 5, func(int) []byte { return blob }))
	// start is taken before the subscribe: the read budget is made on the
	// server after that, so the lower bound holds however long the
	// subscribe takes to return.
	start := time.Now()
	es, err := subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	must(t, err)
	n := 0
	for n < 5 {
		ev, _ := nextEvent(t, es, 5*time.Second)
		n += len(ev.Records)
	}
	// 2 MiB of burst, then 3 MiB at 2 MiB/s: at least 1.5 s. Without the
	// limit it takes about 0.1 s; the upper bound only has to catch a budget
	// far too small, and leaves room for a loaded machine under -race.
	if d := time.Since(start); d < 1200*time.Millisecond || d > 10*time.Second {
		t.Fatalf("5 MiB took %v, want about 1.5 s", d)
	}
}
