package kinesisfake

import (
	"bytes"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestRecordsUpToTheStreamsMaxRecordSize: a stream takes records up to its
// MaxRecordSizeInKiB, set at CreateStream or by UpdateMaxRecordSize and
// reported by DescribeStreamSummary; a 10 MiB record comes back whole, in
// a GetRecords answer and in a fan-out event of its own.
func TestRecordsUpToTheStreamsMaxRecordSize(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("small", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	five := bytes.Repeat([]byte{'5'}, 5<<20)
	_, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("small"), PartitionKey: aws.String("k"), Data: five})
	wantCode(t, err, CodeValidation)

	_, err = c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("big"), ShardCount: aws.Int32(1), MaxRecordSizeInKiB: aws.Int32(10240)})
	must(t, err)
	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("big")})
	must(t, err)
	if got := aws.ToInt32(sum.StreamDescriptionSummary.MaxRecordSizeInKiB); got != 10240 {
		t.Fatalf("MaxRecordSizeInKiB of a stream created with 10240: %d", got)
	}
	if got := sum.StreamDescriptionSummary.RecordDistributionStrategy; got != types.RecordDistributionStrategyUserPartitionKey {
		t.Fatalf("RecordDistributionStrategy of a stream created without one: %q", got)
	}
	ten := bytes.Repeat([]byte{'x'}, 10<<20)
	for _, data := range [][]byte{five, ten} {
		_, err = c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("big"), PartitionKey: aws.String("k"), Data: data})
		must(t, err)
	}
	_, err = c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("big"), PartitionKey: aws.String("k"), Data: append(ten, 'y')})
	wantCode(t, err, CodeValidation)

	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("big"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	var got [][]byte
	next := it.ShardIterator
	for len(got) < 2 {
		out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: next})
		must(t, err)
		if len(out.Records) > 1 {
			t.Fatalf("one GetRecords answer holds %d records of 5 and 10 MiB: more than 10 MiB", len(out.Records))
		}
		for _, r := range out.Records {
			got = append(got, r.Data)
		}
		next = out.NextShardIterator
	}
	if !bytes.Equal(got[0], five) || !bytes.Equal(got[1], ten) {
		t.Fatalf("records read back: %d and %d bytes, want 5 MiB and 10 MiB as written", len(got[0]), len(got[1]))
	}

	arn, err := s.RegisterConsumer("big", "app")
	must(t, err)
	es, err := subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
	must(t, err)
	var sizes []int
	for len(sizes) < 2 {
		ev, ok := nextEvent(t, es, 10*time.Second)
		if !ok {
			t.Fatal("the subscription ended before both records came")
		}
		for _, r := range ev.Records {
			sizes = append(sizes, len(r.Data))
		}
	}
	if sizes[0] != 5<<20 || sizes[1] != 10<<20 {
		t.Fatalf("records of the fan-out events: %v bytes", sizes)
	}

	// Lowered again, the stream refuses what it took before.
	_, err = c.UpdateMaxRecordSize(ctx, &kinesis.UpdateMaxRecordSizeInput{StreamARN: aws.String(s.StreamARN("big")), MaxRecordSizeInKiB: aws.Int32(2048)})
	must(t, err)
	_, err = c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("big"), PartitionKey: aws.String("k"), Data: five})
	wantCode(t, err, CodeValidation)
	_, err = c.UpdateMaxRecordSize(ctx, &kinesis.UpdateMaxRecordSizeInput{StreamARN: aws.String(s.StreamARN("big")), MaxRecordSizeInKiB: aws.Int32(10241)})
	wantCode(t, err, CodeValidation)
	_, err = c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("huge"), ShardCount: aws.Int32(1), MaxRecordSizeInKiB: aws.Int32(20480)})
	wantCode(t, err, CodeValidation)
}

// TestPutRecordsTakesTenMiB: a PutRecords call takes up to 10 MiB of
// records in all, not more.
func TestPutRecordsTakesTenMiB(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 2), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	entries := func(n int) []types.PutRecordsRequestEntry {
		var out []types.PutRecordsRequestEntry
		for range n {
			out = append(out, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: make([]byte, 1<<20-1)})
		}
		return out
	}
	out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries(10)})
	must(t, err)
	if aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("%d of 10 records of 1 MiB failed", aws.ToInt32(out.FailedRecordCount))
	}
	_, err = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries(11)})
	wantCode(t, err, CodeInvalidArgument)
}

// TestAutoDistributionPlacesRecordsItself: an ON_DEMAND stream switched to
// AUTO spreads records of one partition key (and one explicit hash key)
// over every open shard; switched back, it places them by key again, and
// the records written meanwhile keep their shards. A PROVISIONED stream
// refuses AUTO.
func TestAutoDistributionPlacesRecordsItself(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("prov", 2), Stream("od", 4, OnDemand()), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	_, err := c.UpdateStreamRecordDistributionStrategy(ctx, &kinesis.UpdateStreamRecordDistributionStrategyInput{StreamARN: aws.String(s.StreamARN("prov")), RecordDistributionStrategy: types.RecordDistributionStrategyAuto})
	wantCode(t, err, CodeInvalidArgument)
	_, err = c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("prov2"), ShardCount: aws.Int32(1), RecordDistributionStrategy: types.RecordDistributionStrategyAuto})
	wantCode(t, err, CodeInvalidArgument)

	_, err = c.UpdateStreamRecordDistributionStrategy(ctx, &kinesis.UpdateStreamRecordDistributionStrategyInput{StreamARN: aws.String(s.StreamARN("od")), RecordDistributionStrategy: types.RecordDistributionStrategyAuto})
	must(t, err)
	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("od")})
	must(t, err)
	if d := sum.StreamDescriptionSummary; d.RecordDistributionStrategy != types.RecordDistributionStrategyAuto || d.StreamModeDetails.StreamMode != types.StreamModeOnDemand {
		t.Fatalf("the stream switched to AUTO is described as %q, %q", d.RecordDistributionStrategy, d.StreamModeDetails.StreamMode)
	}
	placed := map[string]int{}
	for i := range 8 {
		in := &kinesis.PutRecordInput{StreamName: aws.String("od"), PartitionKey: aws.String("one-key"), Data: []byte("auto")}
		if i%2 == 1 {
			in.ExplicitHashKey = aws.String("0")
		}
		out, err := c.PutRecord(ctx, in)
		must(t, err)
		placed[aws.ToString(out.ShardId)]++
	}
	if len(placed) != 4 {
		t.Fatalf("8 records of one key on an AUTO stream of 4 shards went to %v: the stream places records itself", placed)
	}

	must(t, s.SetRecordDistribution("od", "USER_PARTITION_KEY"))
	byKey := map[string]bool{}
	for range 4 {
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("od"), PartitionKey: aws.String("one-key"), Data: []byte("user")})
		must(t, err)
		byKey[aws.ToString(out.ShardId)] = true
	}
	if len(byKey) != 1 {
		t.Fatalf("records of one key, placed by key again, went to %d shards", len(byKey))
	}
	n := 0
	for sh := range placed {
		recs, err := s.ShardRecords("od", sh)
		must(t, err)
		for _, r := range recs {
			if string(r.Data) == "auto" {
				n++
			}
		}
	}
	if n != 8 {
		t.Fatalf("%d of the 8 records written while AUTO are where they were placed", n)
	}
	must(t, s.CreateStream("auto", 2, AutoDistribution()))
}

// TestConsumerLimitOfTheAccount: a stream takes 20 consumers, 50 on an
// account with On-demand Advantage; the refusal names the limit.
func TestConsumerLimitOfTheAccount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []Opt
		limit int
	}{{"standard", nil, 20}, {"advantage", []Opt{OnDemandAdvantage()}, 50}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, append([]Opt{Stream("s", 1), ConsumerActivationDelay(0)}, tc.opts...)...)
			for i := range tc.limit {
				if _, err := s.RegisterConsumer("s", "c"+string(rune('a'+i/26))+string(rune('a'+i%26))); err != nil {
					t.Fatalf("consumer %d of %d: %v", i+1, tc.limit, err)
				}
			}
			c := newClient(s)
			_, err := c.RegisterStreamConsumer(testCtx(t), &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s")), ConsumerName: aws.String("one-more")})
			wantCode(t, err, CodeLimitExceeded)
		})
	}
}
