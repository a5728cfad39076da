package emulator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestKinesisLocalSubscribeToShard reads every record of a two-shard stream
// through Enhanced Fan-Out with the real SDK, kinesis-local behind EFOProxy.
func TestKinesisLocalSubscribeToShard(t *testing.T) {
	t.Parallel()
	k := KinesisLocal(t, WithStreams("efo:2"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := k.Client()
	waitStreamActive(ctx, t, c, "efo")
	want := putRecords(ctx, t, c, "efo", 300)
	wantPerShard := map[string]int{}
	for _, r := range want {
		wantPerShard[r.shard]++
	}
	consumer := registerConsumer(ctx, t, c, k.StreamARN("efo"), "efo-test")
	efo := k.Client(func(o *kinesis.Options) { o.BaseEndpoint = aws.String(EFOProxy(t, k.Endpoint)) })

	var (
		mu  sync.Mutex
		got []putRecord
		wg  sync.WaitGroup
	)
	shards := shardIDs(ctx, t, c, "efo")
	errs := make(chan error, len(shards))
	for _, shard := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, err := readShard(ctx, efo, consumer, shard, wantPerShard[shard])
			mu.Lock()
			got = append(got, recs...)
			mu.Unlock()
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	assertExactlyOnce(t, want, got)
}

// readShard subscribes to shard from TRIM_HORIZON and reads until it holds
// want records and then one event more, so that a duplicate delivered right
// after the last record is caught too.
func readShard(ctx context.Context, c *kinesis.Client, consumer, shard string, want int) ([]putRecord, error) {
	out, err := c.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String(consumer),
		ShardId:          aws.String(shard),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
	}, ownEventStreamCodec)
	if err != nil {
		return nil, err
	}
	stream := out.GetStream()
	defer stream.Close()
	var got []putRecord
	extra := 0
	for ev := range stream.Events() {
		e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !ok {
			return got, errors.New("unexpected event type")
		}
		if e.Value.ContinuationSequenceNumber == nil {
			return got, errors.New("event without ContinuationSequenceNumber on an open shard")
		}
		for _, r := range e.Value.Records {
			got = append(got, putRecord{shard: shard, seq: aws.ToString(r.SequenceNumber), data: string(r.Data)})
		}
		if len(got) >= want {
			if extra++; extra > 1 {
				return got, nil
			}
		}
	}
	if err := stream.Err(); err != nil {
		return got, err
	}
	return got, errors.New("subscription ended early on " + shard)
}

// ownEventStreamCodec gives one SubscribeToShard call a protocol instance of
// its own. Without it, concurrent subscriptions on one client fail under
// -race: the client's protocol shares one event stream codec with unguarded
// scratch fields between all streams (aws/smithy-go issue 714, seen with
// smithy-go v1.28.9; benign in effect, but -race reports it).
func ownEventStreamCodec(o *kinesis.Options) {
	o.Protocol = kinesis.New(kinesis.Options{}).Options().Protocol
}

// TestKinesisLocalResubscribeTooSoon checks that kinesis-local's in-band
// ResourceInUseException reaches the caller through EFOProxy as the SDK's
// modelled error, and that the shard can be subscribed again later.
//
// kinesis-local refuses a subscribe while another subscription of the
// consumer and shard is active (until it notices the first one close), not
// for a time after it: the second subscribe is made while the first stream
// is still open, so that it is refused however slow the machine is.
func TestKinesisLocalResubscribeTooSoon(t *testing.T) {
	t.Parallel()
	k := KinesisLocal(t, WithStreams("busy:1"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := k.Client()
	waitStreamActive(ctx, t, c, "busy")
	consumer := registerConsumer(ctx, t, c, k.StreamARN("busy"), "busy-test")
	efo := k.Client(func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(EFOProxy(t, k.Endpoint))
		o.RetryMaxAttempts = 1
	})
	shard := shardIDs(ctx, t, c, "busy")[0]
	in := &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String(consumer),
		ShardId:          aws.String(shard),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest},
	}

	out, err := efo.SubscribeToShard(ctx, in, ownEventStreamCodec)
	if err != nil {
		t.Fatalf("first SubscribeToShard: %v", err)
	}
	stream := out.GetStream()
	defer stream.Close()

	_, err = efo.SubscribeToShard(ctx, in, ownEventStreamCodec)
	var inUse *types.ResourceInUseException
	if !errors.As(err, &inUse) {
		t.Fatalf("resubscribe while the first subscription is open: got %v (%T), want *types.ResourceInUseException", err, err)
	}

	select {
	case <-stream.Events():
	case <-ctx.Done():
		t.Fatal("no event on the first subscription")
	}
	stream.Close()
	closed := time.Now()

	for {
		out, err := efo.SubscribeToShard(ctx, in, ownEventStreamCodec)
		if err == nil {
			out.GetStream().Close()
			t.Logf("resubscribe accepted %v after closing", time.Since(closed).Round(100*time.Millisecond))
			return
		}
		if !errors.As(err, &inUse) {
			t.Fatalf("resubscribe: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("shard still in use after the test deadline")
		case <-time.After(250 * time.Millisecond):
		}
	}
}
