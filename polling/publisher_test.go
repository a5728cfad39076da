package polling

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/logging"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// fakeAPI serves a shard of numbered records ("1", "2", ...) through function
// hooks; iterators are the index of the next record.
type fakeAPI struct {
	mu        sync.Mutex
	records   int  // records in the shard
	closed    bool // the shard is closed at its end
	perCall   int
	size      int     // bytes of each record's data; 1 when 0
	limits    []int32 // the Limit of each GetRecords call
	iterCalls []*kinesis.GetShardIteratorInput
	getTimes  []time.Time
	fail      func(call int) error // GetRecords error for the n-th call, if any
}

func (f *fakeAPI) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.iterCalls = append(f.iterCalls, in)
	next := 0
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeAfterSequenceNumber:
		n, _ := strconv.Atoi(*in.StartingSequenceNumber)
		next = n
	case types.ShardIteratorTypeAtSequenceNumber:
		n, _ := strconv.Atoi(*in.StartingSequenceNumber)
		next = n - 1
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(strconv.Itoa(next))}, nil
}

func (f *fakeAPI) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.getTimes = append(f.getTimes, time.Now())
	f.limits = append(f.limits, aws.ToInt32(in.Limit))
	if f.fail != nil {
		if err := f.fail(len(f.getTimes)); err != nil {
			return nil, err
		}
	}
	next, _ := strconv.Atoi(*in.ShardIterator)
	out := &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(int64(f.records - next))}
	data := []byte("x")
	if f.size > 0 {
		data = make([]byte, f.size)
	}
	for len(out.Records) < min(f.perCall, int(aws.ToInt32(in.Limit))) && next < f.records {
		next++
		out.Records = append(out.Records, types.Record{SequenceNumber: aws.String(strconv.Itoa(next)), Data: data})
	}
	if f.closed && next == f.records {
		out.ChildShards = []types.ChildShard{{ShardId: aws.String("child")}}
		return out, nil
	}
	out.NextShardIterator = aws.String(strconv.Itoa(next))
	return out, nil
}

// collect reads until the shard ends or until want records arrived.
func collect(t *testing.T, p *Publisher, start shard.Start, want int) ([]string, []shard.Batch, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seqs []string
	var batches []shard.Batch
	err := p.Read(ctx, "shardId-0", start, nil, func(_ context.Context, b shard.Batch) error {
		batches = append(batches, b)
		for _, r := range b.Records {
			seqs = append(seqs, *r.SequenceNumber)
		}
		if len(seqs) >= want && !b.End {
			cancel()
		}
		return nil
	})
	return seqs, batches, err
}

func checkSequence(t *testing.T, seqs []string, from, to int) {
	t.Helper()
	if len(seqs) != to-from+1 {
		t.Fatalf("got %d records %v, want %d..%d", len(seqs), seqs, from, to)
	}
	for i, s := range seqs {
		if s != strconv.Itoa(from+i) {
			t.Fatalf("record %d is %s, want %d: %v", i, s, from+i, seqs)
		}
	}
}

func TestReadsClosedShardToItsEnd(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 25, closed: true, perCall: 10}
	p := New(api, "arn:stream", Options{})
	seqs, batches, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, seqs, 1, 25)
	last := batches[len(batches)-1]
	if !last.End || len(last.ChildShards) != 1 || len(last.Records) != 5 {
		t.Fatalf("last batch: end %v children %v records %d; want the last 5 records with the end in one batch", last.End, last.ChildShards, len(last.Records))
	}
}

// TestReadsAboutAMebibytePerCall: a call asks for Options.Limit records, or
// fewer once the records are large enough that fewer make ReadBytes: five
// such calls a second exceed a shard's read quota, and a larger read would
// only hold more in memory.
func TestReadsAboutAMebibytePerCall(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 3000, perCall: 10000, size: 4096}
	p := New(api, "arn:stream", Options{})
	seqs, _, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 3000)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	checkSequence(t, seqs, 1, 3000)
	if api.limits[0] != ReadBytes/assumedRecordSize {
		t.Fatalf("the first call asked for %d records, want %d (ReadBytes of records of the assumed size)", api.limits[0], ReadBytes/assumedRecordSize)
	}
	for i, l := range api.limits[1:] {
		if l != ReadBytes/4096 {
			t.Fatalf("call %d asked for %d records of 4 KiB, want %d", i+2, l, ReadBytes/4096)
		}
	}

	api = &fakeAPI{records: 30, perCall: 10000, size: 10}
	p = New(api, "arn:stream", Options{Limit: 20})
	if _, _, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 30); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for i, l := range api.limits {
		if l != 20 {
			t.Fatalf("call %d asked for %d records of 10 bytes with Limit 20, want 20", i+1, l)
		}
	}
}

func TestNeverMoreThanFiveCallsPerSecond(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 12, closed: true, perCall: 1}
	p := New(api, "arn:stream", Options{Interval: 10 * time.Millisecond})
	if _, _, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 1000); err != nil {
		t.Fatal(err)
	}
	// The pacer marks a call made (Done) just before the call reaches the
	// fake, which takes its time: a stall between the two on a loaded
	// machine shortens the gap the fake measures by as much. 20 ms of
	// tolerance absorbs that; without the 200 ms floor the calls would be
	// the requested 10 ms apart (plus a stall), far below 180 ms.
	const tolerance = 20 * time.Millisecond
	for i := 1; i < len(api.getTimes); i++ {
		if gap := api.getTimes[i].Sub(api.getTimes[i-1]); gap < MinInterval-tolerance {
			t.Fatalf("calls %d and %d only %v apart: above 5 calls/s on one shard", i, i+1, gap)
		}
	}
}

func TestExpiredIteratorResumesAfterLastDelivered(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 30, closed: true, perCall: 10}
	api.fail = func(call int) error {
		if call == 3 {
			return &types.ExpiredIteratorException{Message: aws.String("expired")}
		}
		return nil
	}
	p := New(api, "arn:stream", Options{})
	seqs, _, err := collect(t, p, shard.Start{Kind: shard.AtSequence, Sequence: "1"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, seqs, 1, 30)
	if len(api.iterCalls) != 2 {
		t.Fatalf("%d GetShardIterator calls, want 2", len(api.iterCalls))
	}
	if again := api.iterCalls[1]; again.ShardIteratorType != types.ShardIteratorTypeAfterSequenceNumber || *again.StartingSequenceNumber != "20" {
		t.Fatalf("refreshed iterator from %s %v, want AFTER_SEQUENCE_NUMBER 20", again.ShardIteratorType, aws.ToString(again.StartingSequenceNumber))
	}
}

func TestThrottlingBacksOffWithoutLoss(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 20, closed: true, perCall: 5}
	api.fail = func(call int) error {
		if call%2 == 0 {
			return &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
		}
		return nil
	}
	throttles := 0
	p := New(api, "arn:stream", Options{BackoffInitial: time.Millisecond, RetryLimit: 1, Throttled: func(string) { throttles++ }})
	seqs, _, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 1000)
	if err != nil {
		t.Fatalf("throttling ended the read (it must never count towards the retry limit): %v", err)
	}
	checkSequence(t, seqs, 1, 20)
	if throttles < 3 {
		t.Fatalf("%d throttles reported", throttles)
	}
}

func TestFatalAndRetryLimitErrors(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 5, perCall: 5}
	api.fail = func(int) error { return &types.AccessDeniedException{Message: aws.String("no")} }
	p := New(api, "arn:aws:kinesis:us-east-1:000000000000:stream/s", Options{})
	_, _, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 1000)
	var perr *Error
	if !errors.As(err, &perr) || perr.Op != "GetRecords" {
		t.Fatalf("got %v, want a polling error from GetRecords", err)
	}
	if want := "kinesis:GetRecords"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say what permission is missing", err)
	}

	api = &fakeAPI{records: 5, perCall: 5}
	api.fail = func(int) error { return errors.New("mystery") }
	p = New(api, "arn:stream", Options{RetryLimit: 3, BackoffInitial: time.Millisecond})
	_, _, err = collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 1000)
	if err == nil || len(api.getTimes) != 3 {
		t.Fatalf("after %d calls got %v, want an error after 3", len(api.getTimes), err)
	}
}

// TestSilentEndpointIsWarnedAndRetried: a GetRecords call that got no answer
// within the client's deadline is retried without counting towards the
// retry limit, and warned about with the endpoint. Before, such a failure
// (recoverable) was only a debug line: a silent endpoint went unseen at the
// default log level.
func TestSilentEndpointIsWarnedAndRetried(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{records: 10, closed: true, perCall: 5}
	silent := &awsclient.NoAnswerError{Service: "Kinesis", Operation: "GetRecords", Endpoint: "http://127.0.0.1:9", After: 20 * time.Second, Err: context.DeadlineExceeded}
	api.fail = func(call int) error {
		if call <= 3 {
			return silent
		}
		return nil
	}
	logs := &logging.Recorder{}
	p := New(api, "arn:stream", Options{BackoffInitial: time.Millisecond, RetryLimit: 1, Logger: logs})
	seqs, _, err := collect(t, p, shard.Start{Kind: shard.TrimHorizon}, 1000)
	if err != nil {
		t.Fatalf("a silent endpoint ended the read (it must be retried, never counted): %v", err)
	}
	checkSequence(t, seqs, 1, 10)
	if warns := logs.Warnings(); len(warns) != 3 || !strings.Contains(warns[0], "no answer from http://127.0.0.1:9") {
		t.Fatalf("warnings %q, want 3 naming the endpoint", warns)
	}
}

// TestIdleShardBacksOffAndWakesOnRecords: reads that come back empty at
// the shard's tip space the calls out, doubling from interval up to
// idle_interval; a record written meanwhile is read within idle_interval,
// and the call after a read that brought records comes an interval later
// again.
func TestIdleShardBacksOffAndWakesOnRecords(t *testing.T) {
	t.Parallel()
	const idle = 800 * time.Millisecond
	api := &fakeAPI{perCall: 10}
	p := New(api, "arn:stream", Options{IdleInterval: idle})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan time.Time, 10)
	done := make(chan error, 1)
	go func() {
		done <- p.Read(ctx, "shardId-0", shard.Start{Kind: shard.TrimHorizon}, nil, func(_ context.Context, b shard.Batch) error {
			if len(b.Records) > 0 {
				got <- time.Now()
			}
			return nil
		})
	}()
	calls := func() []time.Time {
		api.mu.Lock()
		defer api.mu.Unlock()
		return append([]time.Time(nil), api.getTimes...)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
		}
	}
	waitFor("6 empty reads", func() bool { return len(calls()) >= 6 })
	times := calls()
	const tolerance = 30 * time.Millisecond
	want := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond, idle, idle}
	for i, w := range want {
		if gap := times[i+2].Sub(times[i+1]); gap < w-tolerance || gap > w+10*tolerance {
			t.Fatalf("gap %d between empty reads %v, want about %v (gaps double from the interval up to idle_interval)", i+2, gap, w)
		}
	}

	api.mu.Lock()
	api.records = 3 // written now, during the idle spell
	api.mu.Unlock()
	written := time.Now()
	var readAt time.Time
	select {
	case readAt = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("a record written to an idle shard was not read within 5 s")
	}
	if d := readAt.Sub(written); d > idle+10*tolerance {
		t.Fatalf("a record written to an idle shard was read after %v, want within idle_interval (%v)", d, idle)
	}
	n := len(calls())
	waitFor("the call after the read with records", func() bool { return len(calls()) > n })
	times = calls()
	if gap := times[n].Sub(times[n-1]); gap > MinInterval+10*tolerance {
		t.Fatalf("after a read with records the next call came %v later, want the interval (%v)", gap, MinInterval)
	}
	cancel()
	<-done
}
