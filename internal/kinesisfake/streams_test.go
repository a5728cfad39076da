package kinesisfake

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestCreateStream(t *testing.T) {
	s := newServer(t, Stream("taken", 1))
	c := newClient(s)
	ctx := testCtx(t)
	cases := []struct {
		name string
		in   kinesis.CreateStreamInput
		code string
	}{
		{"ok", kinesis.CreateStreamInput{StreamName: aws.String("a"), ShardCount: aws.Int32(3)}, ""},
		{"on demand", kinesis.CreateStreamInput{StreamName: aws.String("od"), StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}}, ""},
		{"exists", kinesis.CreateStreamInput{StreamName: aws.String("taken"), ShardCount: aws.Int32(1)}, CodeResourceInUse},
		{"no shard count", kinesis.CreateStreamInput{StreamName: aws.String("b")}, CodeInvalidArgument},
		{"zero shards", kinesis.CreateStreamInput{StreamName: aws.String("b"), ShardCount: aws.Int32(0)}, CodeValidation},
		{"too many shards", kinesis.CreateStreamInput{StreamName: aws.String("b"), ShardCount: aws.Int32(10001)}, CodeLimitExceeded},
		{"bad name", kinesis.CreateStreamInput{StreamName: aws.String("a/b"), ShardCount: aws.Int32(1)}, CodeValidation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateStream(ctx, &tc.in)
			if tc.code == "" {
				must(t, err)
				return
			}
			wantCode(t, err, tc.code)
		})
	}

	// The shards of "a" split the hash key space evenly and in order.
	shards, err := s.Shards("a")
	must(t, err)
	want := [][2]string{
		{"0", "113427455640312821154458202477256070484"},
		{"113427455640312821154458202477256070485", "226854911280625642308916404954512140969"},
		{"226854911280625642308916404954512140970", "340282366920938463463374607431768211455"},
	}
	for i, sh := range shards {
		if got := fmt.Sprint(*sh.ShardId); got != shardIDFor(i) {
			t.Errorf("shard %d id %s", i, got)
		}
		if *sh.HashKeyRange.StartingHashKey != want[i][0] || *sh.HashKeyRange.EndingHashKey != want[i][1] {
			t.Errorf("shard %d range [%s, %s], want %v", i, *sh.HashKeyRange.StartingHashKey, *sh.HashKeyRange.EndingHashKey, want[i])
		}
	}
	od, err := s.Shards("od")
	must(t, err)
	if len(od) != 4 {
		t.Errorf("on-demand stream has %d shards, want 4", len(od))
	}
}

func TestStreamStatusDelay(t *testing.T) {
	t.Parallel()
	// The clock stands still except where the test moves it on, so each
	// status lasts as long as the test needs, however slow the calls are.
	// Quotas are off: the waiters' DescribeStream calls would otherwise
	// drain a bucket that a standing clock never refills.
	const delay = 5 * time.Second
	clock := newFakeClock()
	s := newServer(t, StreamStatusDelay(delay), withClock(clock), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	// waitDescribe lets w poll DescribeStream: the clock passes the delay
	// after w's second call, so w has seen the old status at least once.
	waitDescribe := func(wait func() error) {
		t.Helper()
		advanceAfterCalls(t, s, clock, "DescribeStream", s.Calls("DescribeStream")+2, delay)
		must(t, wait())
	}
	_, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(1)})
	must(t, err)
	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	must(t, err)
	if sum.StreamDescriptionSummary.StreamStatus != types.StreamStatusCreating {
		t.Fatalf("status %s, want CREATING", sum.StreamDescriptionSummary.StreamStatus)
	}
	_, err = c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantCode(t, err, CodeResourceNotFound)
	_, err = c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	wantCode(t, err, CodeResourceInUse)

	// The SDK's waiter sees it become ACTIVE.
	w := kinesis.NewStreamExistsWaiter(c, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = 100 * time.Millisecond
	})
	waitDescribe(func() error {
		return w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("s")}, 10*time.Second)
	})

	_, err = c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String("shardId-000000000000"), NewStartingHashKey: aws.String("100")})
	must(t, err)
	sum, err = c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	must(t, err)
	if sum.StreamDescriptionSummary.StreamStatus != types.StreamStatusUpdating {
		t.Fatalf("status after split %s, want UPDATING", sum.StreamDescriptionSummary.StreamStatus)
	}
	_, err = c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String("shardId-000000000001"), NewStartingHashKey: aws.String("50")})
	wantCode(t, err, CodeResourceInUse)
	// Writes go on while UPDATING.
	_, err = c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
	must(t, err)

	waitDescribe(func() error {
		return w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("s")}, 10*time.Second)
	})
	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("s")})
	must(t, err)
	sum, err = c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	must(t, err)
	if sum.StreamDescriptionSummary.StreamStatus != types.StreamStatusDeleting {
		t.Fatalf("status after delete %s, want DELETING", sum.StreamDescriptionSummary.StreamStatus)
	}
	nw := kinesis.NewStreamNotExistsWaiter(c, func(o *kinesis.StreamNotExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = 100 * time.Millisecond
	})
	waitDescribe(func() error {
		return nw.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("s")}, 10*time.Second)
	})
}

func TestDeleteStream(t *testing.T) {
	s := newServer(t, Stream("plain", 1), Stream("withconsumer", 1))
	c := newClient(s)
	ctx := testCtx(t)
	_, err := s.RegisterConsumer("withconsumer", "app")
	must(t, err)

	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("missing")})
	wantCode(t, err, CodeResourceNotFound)
	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("withconsumer")})
	wantCode(t, err, CodeResourceInUse)
	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamARN: aws.String(s.StreamARN("withconsumer")), EnforceConsumerDeletion: aws.Bool(true)})
	must(t, err)
	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamARN: aws.String(s.StreamARN("plain"))})
	must(t, err)
	_, err = c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("plain")})
	wantCode(t, err, CodeResourceNotFound)
	if s.ConsumerARN("withconsumer", "app") != "" {
		t.Fatal("consumer survived its stream")
	}
	// The name can be used again.
	_, err = c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("plain"), ShardCount: aws.Int32(1)})
	must(t, err)
}

func TestDescribeStreamAndSummary(t *testing.T) {
	s := newServer(t, Stream("s", 5))
	c := newClient(s)
	ctx := testCtx(t)
	_, err := s.RegisterConsumer("s", "app")
	must(t, err)
	_, err = s.SplitShard("s", "shardId-000000000000", "")
	must(t, err)

	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(s.StreamARN("s"))})
	must(t, err)
	d := sum.StreamDescriptionSummary
	if *d.StreamName != "s" || *d.StreamARN != s.StreamARN("s") || d.StreamStatus != types.StreamStatusActive ||
		*d.OpenShardCount != 6 || *d.ConsumerCount != 1 || *d.RetentionPeriodHours != 24 || d.StreamCreationTimestamp == nil {
		t.Fatalf("summary %+v", d)
	}

	// Pages of 3 shards, 7 shards in all (one closed).
	var ids []string
	var start *string
	for page := 0; ; page++ {
		out, err := c.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("s"), Limit: aws.Int32(3), ExclusiveStartShardId: start})
		must(t, err)
		for _, sh := range out.StreamDescription.Shards {
			ids = append(ids, *sh.ShardId)
		}
		if !*out.StreamDescription.HasMoreShards {
			break
		}
		start = out.StreamDescription.Shards[len(out.StreamDescription.Shards)-1].ShardId
		if page > 5 {
			t.Fatal("too many pages")
		}
	}
	if len(ids) != 7 || ids[6] != "shardId-000000000006" {
		t.Fatalf("shards %v", ids)
	}

	cases := []struct {
		name string
		in   kinesis.DescribeStreamSummaryInput
		code string
	}{
		{"missing", kinesis.DescribeStreamSummaryInput{StreamName: aws.String("nope")}, CodeResourceNotFound},
		{"other region", kinesis.DescribeStreamSummaryInput{StreamARN: aws.String("arn:aws:kinesis:eu-west-1:000000000000:stream/s")}, CodeResourceNotFound},
		{"bad arn", kinesis.DescribeStreamSummaryInput{StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:table/s")}, CodeInvalidArgument},
		{"name and arn disagree", kinesis.DescribeStreamSummaryInput{StreamName: aws.String("t"), StreamARN: aws.String(s.StreamARN("s"))}, CodeInvalidArgument},
		{"neither", kinesis.DescribeStreamSummaryInput{}, CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.DescribeStreamSummary(ctx, &tc.in)
			wantCode(t, err, tc.code)
		})
	}
}

func TestListStreams(t *testing.T) {
	var opts []Opt
	for i := range 7 {
		opts = append(opts, Stream(fmt.Sprintf("s%d", i), 1))
	}
	s := newServer(t, opts...)
	c := newClient(s)
	ctx := testCtx(t)
	var names []string
	p := kinesis.NewListStreamsPaginator(c, &kinesis.ListStreamsInput{Limit: aws.Int32(3)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		must(t, err)
		if len(out.StreamNames) > 3 || len(out.StreamSummaries) != len(out.StreamNames) {
			t.Fatalf("page %v", out.StreamNames)
		}
		names = append(names, out.StreamNames...)
	}
	if fmt.Sprint(names) != "[s0 s1 s2 s3 s4 s5 s6]" {
		t.Fatalf("names %v", names)
	}
	out, err := c.ListStreams(ctx, &kinesis.ListStreamsInput{ExclusiveStartStreamName: aws.String("s4")})
	must(t, err)
	if fmt.Sprint(out.StreamNames) != "[s5 s6]" || *out.HasMoreStreams {
		t.Fatalf("after s4: %v", out.StreamNames)
	}
}
