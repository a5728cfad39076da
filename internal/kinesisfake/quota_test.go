package kinesisfake

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestGetRecordsCallQuota(t *testing.T) {
	clock := newFakeClock() // no refill between the calls, however slow they are
	s := newServer(t, Stream("s", 2), withClock(clock))
	c := newClient(s)
	ctx := testCtx(t)
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	for i := 1; i <= 6; i++ {
		_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if i < 6 {
			must(t, err)
			continue
		}
		wantCode(t, err, CodeProvisionedThroughput)
	}
	if n := s.Throttled("GetRecords"); n != 1 {
		t.Fatalf("Throttled(GetRecords) = %d, want 1", n)
	}
	if n := s.Calls("GetRecords"); n != 6 {
		t.Fatalf("Calls(GetRecords) = %d, want 6", n)
	}
	// The quota is per shard: the other shard is not affected.
	it2, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000001"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it2.ShardIterator})
	must(t, err)
	// A second later the shard serves again.
	clock.advance(time.Second)
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	must(t, err)
}

func TestGetRecordsByteQuota(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newServer(t, Stream("s", 1), withClock(clock))
	c := newClient(s)
	ctx := testCtx(t)
	blob := make([]byte, 1<<20-2)
	must(t, s.PutToShard("s", "shardId-000000000000", 10, func(int) []byte { return blob }))
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	must(t, err)
	if len(out.Records) != 10 {
		t.Fatalf("%d records", len(out.Records))
	}
	// After 10 MiB against a budget of 2 MiB that refills at 2 MiB/s the
	// shard is 8 MiB in debt and refuses reads for 4 s.
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantCode(t, err, CodeProvisionedThroughput)
	clock.advance(1500 * time.Millisecond)
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantCode(t, err, CodeProvisionedThroughput)
	clock.advance(2400 * time.Millisecond) // 3.9 s
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantCode(t, err, CodeProvisionedThroughput)
	clock.advance(200 * time.Millisecond) // 4.1 s
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	must(t, err)
}

func TestQuotasOff(t *testing.T) {
	s := newServer(t, Stream("s", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	for range 30 {
		_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		must(t, err)
		_, err = c.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("s")})
		must(t, err)
	}
	for i := range 25 {
		_, err := s.RegisterConsumer("s", fmt.Sprint("c", i))
		must(t, err)
	}
}

func TestSubscribeRateAndFiveSecondRule(t *testing.T) {
	clock := newFakeClock()
	s := newServer(t, TLS(), Stream("s", 1), withClock(clock))
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	const shard = "shardId-000000000000"
	_, err = subscribe(t, c, arn, shard, trimHorizon())
	must(t, err)
	_, err = subscribe(t, c, arn, shard, trimHorizon())
	wantCode(t, err, CodeLimitExceeded)
	clock.advance(1100 * time.Millisecond)
	_, err = subscribe(t, c, arn, shard, trimHorizon())
	wantCode(t, err, CodeResourceInUse)
	if n := s.Throttled("SubscribeToShard"); n != 1 {
		t.Fatalf("Throttled(SubscribeToShard) = %d, want 1", n)
	}
	if n := s.Calls("SubscribeToShard"); n != 3 {
		t.Fatalf("Calls(SubscribeToShard) = %d, want 3", n)
	}
}

func TestControlPlaneQuotas(t *testing.T) {
	// The clock stands still between calls: a burst is exactly the bucket,
	// however long the calls take.
	clock := newFakeClock()
	s := newServer(t, Stream("s", 1), Stream("t", 1), ConsumerActivationDelay(time.Hour), withClock(clock))
	c := newClient(s)
	ctx := testCtx(t)
	describe := func() string {
		_, err := c.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("s")})
		return errCode(err)
	}

	// DescribeStream: 10 per second per account.
	throttled := 0
	for range 11 {
		if describe() == CodeLimitExceeded {
			throttled++
		}
	}
	if throttled != 1 || s.Throttled("DescribeStream") != 1 {
		t.Fatalf("DescribeStream: %d of 11 throttled", throttled)
	}
	// 110 ms refill one call, not two.
	clock.advance(110 * time.Millisecond)
	if code := describe(); code != "" {
		t.Fatalf("DescribeStream 110 ms after the burst: %s", code)
	}
	if code := describe(); code != CodeLimitExceeded {
		t.Fatalf("second DescribeStream 110 ms after the burst: %q, want %s", code, CodeLimitExceeded)
	}

	// RegisterStreamConsumer: at most 5 CREATING per account.
	for i := range 5 {
		_, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s")), ConsumerName: aws.String(fmt.Sprint("c", i))})
		must(t, err)
	}
	clock.advance(1100 * time.Millisecond) // let the 5 TPS bucket refill
	_, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("t")), ConsumerName: aws.String("sixth")})
	wantCode(t, err, CodeLimitExceeded)

	// At most 20 consumers per stream (ACTIVE ones made by the helper, which
	// does not apply quotas itself).
	for i := range 20 {
		_, err := s.RegisterConsumer("t", fmt.Sprint("a", i))
		must(t, err)
	}
	s2 := newServer(t, Stream("u", 1))
	for i := range 20 {
		_, err := s2.RegisterConsumer("u", fmt.Sprint("a", i))
		must(t, err)
	}
	_, err = newClient(s2).RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s2.StreamARN("u")), ConsumerName: aws.String("a20")})
	wantCode(t, err, CodeLimitExceeded)

	// ListStreamConsumers: 5 per second per stream.
	throttled = 0
	for range 6 {
		if _, err := c.ListStreamConsumers(ctx, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(s.StreamARN("t"))}); errCode(err) == CodeLimitExceeded {
			throttled++
		}
	}
	if throttled != 1 {
		t.Fatalf("ListStreamConsumers: %d of 6 throttled", throttled)
	}
}

func TestWriteQuotas(t *testing.T) {
	t.Parallel()
	clock := newFakeClock() // no refill between the calls
	s := newServer(t, Stream("s", 1), WriteQuotas(true), withClock(clock))
	c := newClient(s)
	ctx := testCtx(t)
	var entries []types.PutRecordsRequestEntry
	for i := range 500 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint(i)), Data: []byte("x")})
	}
	failed := 0
	for range 3 {
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries})
		must(t, err)
		failed += int(*out.FailedRecordCount)
		for _, r := range out.Records {
			if r.ErrorCode != nil && *r.ErrorCode != CodeProvisionedThroughput {
				t.Fatalf("entry error %s", *r.ErrorCode)
			}
		}
	}
	// 1,500 records against a bucket of 1,000: with the clock standing
	// still, exactly 500 fail.
	if failed != 500 {
		t.Fatalf("%d of 1500 failed, want 500", failed)
	}
	if s.Throttled("PutRecords") != failed {
		t.Fatalf("Throttled(PutRecords) = %d, want %d", s.Throttled("PutRecords"), failed)
	}
	// Byte budget: 1 MiB per second.
	clock2 := newFakeClock()
	s2 := newServer(t, Stream("s", 1), WriteQuotas(true), withClock(clock2))
	c2 := newClient(s2)
	putMiB := func() error {
		_, err := c2.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: make([]byte, 1<<20)})
		return err
	}
	// The first record of 1 MiB (and its key) leaves the budget one byte in
	// debt: the next is refused until a millisecond has refilled it.
	must(t, putMiB())
	wantCode(t, putMiB(), CodeProvisionedThroughput)
	clock2.advance(time.Millisecond)
	must(t, putMiB())
	// Now about 1 MiB in debt: even a byte is refused.
	_, err := c2.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantCode(t, err, CodeProvisionedThroughput)
}
