package sdkopt_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
)

// fakeShard starts a fake with one shard of stream s holding n records made
// by record, and a consumer of it.
func fakeShard(t *testing.T, n int, record func(i int) (pk string, data []byte), opts ...kinesisfake.Opt) (*kinesisfake.Server, string) {
	t.Helper()
	srv, err := kinesisfake.New(append([]kinesisfake.Opt{kinesisfake.TLS(), kinesisfake.Stream("s", 1), kinesisfake.Quotas(false), kinesisfake.SubscribeTakeoverWindow(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	for i := range n {
		pk, data := record(i)
		if _, _, err := srv.Put("s", pk, data); err != nil {
			t.Fatal(err)
		}
	}
	consumer, err := srv.RegisterConsumer("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	return srv, consumer
}

// TestFastRecordsReadsAsTheSDK: over the fake, GetRecords and
// SubscribeToShard through FastRecords return what the SDK's own decoding
// returns, record for record, and errors (an HTTP error, an exception frame
// in the event stream) keep their codes.
func TestFastRecordsReadsAsTheSDK(t *testing.T) {
	t.Parallel()
	srv, consumer := fakeShard(t, 300, func(i int) (string, []byte) {
		data := make([]byte, i%257)
		for j := range data {
			data[j] = byte(i * j)
		}
		return fmt.Sprintf("k\"ey\\%d<&>ü", i), data
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bare, fast := srv.NewClient(), srv.NewClient(sdkopt.FastRecords)
	const shard = "shardId-000000000000"

	read := func(c *kinesis.Client) *kinesis.GetRecordsOutput {
		t.Helper()
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := read(bare), read(fast)
	if len(want.Records) != 300 || !reflect.DeepEqual(got.Records, want.Records) {
		t.Fatalf("GetRecords: %d records through FastRecords, %d through the SDK, or they differ", len(got.Records), len(want.Records))
	}
	if got.NextShardIterator == nil || !reflect.DeepEqual(got.MillisBehindLatest, want.MillisBehindLatest) {
		t.Fatalf("GetRecords: iterator %v, millis behind %v; want an iterator and %v", got.NextShardIterator, got.MillisBehindLatest, *want.MillisBehindLatest)
	}
	_, err := fast.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("not-an-iterator")})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InvalidArgumentException" {
		t.Fatalf("GetRecords with a bad iterator through FastRecords: %v, want InvalidArgumentException", err)
	}

	subscribe := func(opt func(*kinesis.Options)) ([]types.Record, error) {
		t.Helper()
		out, err := fast.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
			ConsumerARN: aws.String(consumer), ShardId: aws.String(shard),
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
		}, opt)
		if err != nil {
			t.Fatal(err)
		}
		es := out.GetStream()
		defer es.Close()
		var recs []types.Record
		for ev := range es.Events() {
			e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
			if !ok {
				t.Fatalf("event %T", ev)
			}
			recs = append(recs, e.Value.Records...)
			if len(recs) >= 300 {
				return recs, nil
			}
		}
		return recs, es.Err()
	}
	wantEv, err := subscribe(sdkopt.OwnProtocol)
	if err != nil {
		t.Fatal(err)
	}
	gotEv, err := subscribe(sdkopt.FastRecords)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotEv, wantEv) || !reflect.DeepEqual(gotEv, want.Records) {
		t.Fatalf("SubscribeToShard: %d records through FastRecords, %d through the SDK, or they differ", len(gotEv), len(wantEv))
	}

	srv.FailSubscriptionAfter(shard, 1, 0, "InternalFailureException")
	_, err = subscribe(sdkopt.FastRecords)
	if !errors.As(err, &api) || api.ErrorCode() != "InternalFailureException" {
		t.Fatalf("an exception frame through FastRecords: %v, want InternalFailureException", err)
	}
}

// TestEventGate: through a gate, events come as the caller asks for them
// (every record, in order), and closing the gate ends a decoding that waits
// at it, so the SDK's goroutines end with the stream.
func TestEventGate(t *testing.T) {
	t.Parallel()
	srv, consumer := fakeShard(t, 100, func(i int) (string, []byte) { return "k", fmt.Appendf(nil, "%03d", i) }, kinesisfake.MaxEventRecords(7))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client := srv.NewClient()
	subscribe := func(g *sdkopt.EventGate) *kinesis.SubscribeToShardEventStream {
		out, err := client.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
			ConsumerARN: aws.String(consumer), ShardId: aws.String("shardId-000000000000"),
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
		}, g.Option)
		if err != nil {
			t.Fatal(err)
		}
		return out.GetStream()
	}

	g := sdkopt.NewEventGate()
	es := subscribe(g)
	var got []string
	for len(got) < 100 {
		g.Next()
		ev, ok := <-es.Events()
		if !ok {
			t.Fatalf("the stream ended after %d records: %v", len(got), es.Err())
		}
		for _, r := range ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value.Records {
			got = append(got, string(r.Data))
		}
	}
	for i, d := range got {
		if d != fmt.Sprintf("%03d", i) {
			t.Fatalf("record %d is %q", i, d)
		}
	}
	g.Close()
	es.Close()

	// Never asked: the decoding waits at the gate until it closes.
	g = sdkopt.NewEventGate()
	es = subscribe(g)
	closed := make(chan struct{})
	go func() {
		g.Close()
		es.Close()
		for range es.Events() { // closed once the SDK's decoding goroutine has returned
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's decoding goroutine did not end within 10 s of closing the gate and the stream")
	}
}
