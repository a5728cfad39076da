package kinesisfake

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func bigOf(t *testing.T, s string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func TestPutRecordRouting(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 4))
	c := newClient(s)
	ctx := testCtx(t)
	shards, err := s.Shards("s")
	must(t, err)
	ranges := map[string][2]*big.Int{}
	for _, sh := range shards {
		ranges[*sh.ShardId] = [2]*big.Int{bigOf(t, *sh.HashKeyRange.StartingHashKey), bigOf(t, *sh.HashKeyRange.EndingHashKey)}
	}
	last := map[string]*big.Int{}
	for _, sh := range shards {
		last[*sh.ShardId] = bigOf(t, *sh.SequenceNumberRange.StartingSequenceNumber)
	}
	for i := range 200 {
		pk := fmt.Sprintf("key-%d", i)
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String(pk), Data: []byte(pk)})
		must(t, err)
		sum := md5.Sum([]byte(pk))
		h := new(big.Int).SetBytes(sum[:])
		r := ranges[*out.ShardId]
		if h.Cmp(r[0]) < 0 || h.Cmp(r[1]) > 0 {
			t.Fatalf("%s (hash %s) went to %s [%s, %s]", pk, h, *out.ShardId, r[0], r[1])
		}
		if len(*out.SequenceNumber) != 56 {
			t.Fatalf("sequence number %s is not 56 digits", *out.SequenceNumber)
		}
		seq := bigOf(t, *out.SequenceNumber)
		if seq.Cmp(last[*out.ShardId]) <= 0 {
			t.Fatalf("sequence number %s not above %s in %s", seq, last[*out.ShardId], *out.ShardId)
		}
		last[*out.ShardId] = seq
	}
	for _, tc := range []struct{ key, shard string }{
		{"0", "shardId-000000000000"},
		{"85070591730234615865843651857942052863", "shardId-000000000000"},
		{"85070591730234615865843651857942052864", "shardId-000000000001"},
		{"340282366920938463463374607431768211455", "shardId-000000000003"},
	} {
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamARN: aws.String(s.StreamARN("s")), PartitionKey: aws.String("x"), ExplicitHashKey: aws.String(tc.key), Data: []byte("x")})
		must(t, err)
		if *out.ShardId != tc.shard {
			t.Errorf("hash key %s went to %s, want %s", tc.key, *out.ShardId, tc.shard)
		}
	}
	recs, err := s.ShardRecords("s", "shardId-000000000003")
	must(t, err)
	if got := recs[len(recs)-1]; string(got.Data) != "x" || got.ApproximateArrivalTimestamp == nil {
		t.Fatalf("last record of shard 3: %+v", got)
	}
}

func TestPutRecordErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 1))
	c := newClient(s)
	ctx := testCtx(t)
	cases := []struct {
		name string
		in   kinesis.PutRecordInput
		code string
	}{
		{"missing stream", kinesis.PutRecordInput{StreamName: aws.String("nope"), PartitionKey: aws.String("k"), Data: []byte("x")}, CodeResourceNotFound},
		{"empty partition key", kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String(""), Data: []byte("x")}, CodeValidation},
		{"long partition key", kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String(strings.Repeat("k", 257)), Data: []byte("x")}, CodeValidation},
		{"data too big", kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: make([]byte, 1<<20+1)}, CodeValidation},
		{"hash key too big", kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("340282366920938463463374607431768211456"), Data: []byte("x")}, CodeInvalidArgument},
		{"hash key negative", kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("-1"), Data: []byte("x")}, CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.PutRecord(ctx, &tc.in)
			wantCode(t, err, tc.code)
		})
	}
	// A record of exactly 1 MiB and 256-character keys are fine.
	_, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String(strings.Repeat("ü", 256)), Data: make([]byte, 1<<20)})
	must(t, err)
}

func TestPutRecords(t *testing.T) {
	s := newServer(t, Stream("s", 3))
	c := newClient(s)
	ctx := testCtx(t)
	var entries []types.PutRecordsRequestEntry
	for i := range 500 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint(i)), Data: []byte(fmt.Sprint(i))})
	}
	out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries})
	must(t, err)
	if *out.FailedRecordCount != 0 || len(out.Records) != 500 {
		t.Fatalf("failed %d, results %d", *out.FailedRecordCount, len(out.Records))
	}
	for i, r := range out.Records {
		recs, err := s.ShardRecords("s", *r.ShardId)
		must(t, err)
		found := false
		for _, rec := range recs {
			if *rec.SequenceNumber == *r.SequenceNumber {
				found = string(rec.Data) == fmt.Sprint(i)
			}
		}
		if !found {
			t.Fatalf("entry %d not stored as reported", i)
		}
	}
	_, err = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: append(entries, entries[0])})
	wantCode(t, err, CodeValidation)
	_, err = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String(""), Data: []byte("x")}}})
	wantCode(t, err, CodeValidation)
	_, err = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("nope"), Records: entries[:1]})
	wantCode(t, err, CodeResourceNotFound)
}

// readAll reads a shard from an iterator until it has no more records and
// returns their data.
func readAll(t *testing.T, c *kinesis.Client, it *string) []string {
	t.Helper()
	ctx := testCtx(t)
	var got []string
	for i := 0; it != nil && i < 100; i++ {
		out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
		must(t, err)
		for _, r := range out.Records {
			got = append(got, string(r.Data))
		}
		if len(out.Records) == 0 {
			break
		}
		it = out.NextShardIterator
	}
	return got
}

func TestGetShardIteratorTypes(t *testing.T) {
	s := newServer(t, Stream("s", 2), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	const shard = "shardId-000000000000"
	var seqs []string
	var times []time.Time
	for i := range 5 {
		time.Sleep(3 * time.Millisecond)
		_, seq, err := s.PutWithHashKey("s", "0", "k", []byte(fmt.Sprint(i)))
		must(t, err)
		seqs = append(seqs, seq)
		recs, _ := s.ShardRecords("s", shard)
		times = append(times, *recs[i].ApproximateArrivalTimestamp)
	}
	shards, _ := s.Shards("s")
	start := *shards[0].SequenceNumberRange.StartingSequenceNumber
	_, other, err := s.PutWithHashKey("s", "340282366920938463463374607431768211455", "k", []byte("other"))
	must(t, err)

	iter := func(typ types.ShardIteratorType, seq *string, ts *time.Time) (*string, error) {
		out, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: typ, StartingSequenceNumber: seq, Timestamp: ts})
		if err != nil {
			return nil, err
		}
		return out.ShardIterator, nil
	}
	cases := []struct {
		name string
		typ  types.ShardIteratorType
		seq  *string
		ts   *time.Time
		want string
	}{
		{"trim horizon", types.ShardIteratorTypeTrimHorizon, nil, nil, "0 1 2 3 4"},
		{"latest", types.ShardIteratorTypeLatest, nil, nil, ""},
		{"at timestamp", types.ShardIteratorTypeAtTimestamp, nil, &times[2], "2 3 4"},
		{"at timestamp before all", types.ShardIteratorTypeAtTimestamp, nil, aws.Time(time.Unix(1, 0)), "0 1 2 3 4"},
		{"at timestamp after all", types.ShardIteratorTypeAtTimestamp, nil, aws.Time(time.Now().Add(time.Hour)), ""},
		{"at sequence", types.ShardIteratorTypeAtSequenceNumber, &seqs[2], nil, "2 3 4"},
		{"after sequence", types.ShardIteratorTypeAfterSequenceNumber, &seqs[2], nil, "3 4"},
		{"after last", types.ShardIteratorTypeAfterSequenceNumber, &seqs[4], nil, ""},
		{"after shard start", types.ShardIteratorTypeAfterSequenceNumber, &start, nil, "0 1 2 3 4"},
		{"at shard start", types.ShardIteratorTypeAtSequenceNumber, &start, nil, "0 1 2 3 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, err := iter(tc.typ, tc.seq, tc.ts)
			must(t, err)
			if got := strings.Join(readAll(t, c, it), " "); got != tc.want {
				t.Fatalf("read %q, want %q", got, tc.want)
			}
		})
	}

	// LATEST sees what is put after the iterator was made.
	it, err := iter(types.ShardIteratorTypeLatest, nil, nil)
	must(t, err)
	_, _, err = s.PutWithHashKey("s", "0", "k", []byte("5"))
	must(t, err)
	if got := strings.Join(readAll(t, c, it), " "); got != "5" {
		t.Fatalf("LATEST then put: %q", got)
	}

	errCases := []struct {
		name string
		in   kinesis.GetShardIteratorInput
		code string
	}{
		{"sequence of another shard", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: &other}, CodeInvalidArgument},
		{"sequence of nobody", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String("12345")}, CodeInvalidArgument},
		{"malformed sequence", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String("12a")}, CodeValidation},
		{"no sequence", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber}, CodeInvalidArgument},
		{"no timestamp", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp}, CodeInvalidArgument},
		{"bad type", kinesis.GetShardIteratorInput{ShardIteratorType: "SOMEWHERE"}, CodeValidation},
		{"unknown shard", kinesis.GetShardIteratorInput{ShardId: aws.String("shardId-000000000009"), ShardIteratorType: types.ShardIteratorTypeLatest}, CodeResourceNotFound},
		{"unknown stream", kinesis.GetShardIteratorInput{StreamName: aws.String("nope"), ShardIteratorType: types.ShardIteratorTypeLatest}, CodeResourceNotFound},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.StreamName == nil {
				in.StreamName = aws.String("s")
			}
			if in.ShardId == nil {
				in.ShardId = aws.String(shard)
			}
			_, err := c.GetShardIterator(ctx, &in)
			wantCode(t, err, tc.code)
		})
	}
}

func TestGetRecordsLimitAndMillisBehind(t *testing.T) {
	s := newServer(t, Stream("s", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	must(t, s.PutToShard("s", "shardId-000000000000", 30, func(i int) []byte { return []byte(fmt.Sprint(i)) }))
	time.Sleep(60 * time.Millisecond)
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(10)})
	must(t, err)
	if len(out.Records) != 10 || string(out.Records[9].Data) != "9" {
		t.Fatalf("%d records", len(out.Records))
	}
	if *out.MillisBehindLatest < 50 {
		t.Fatalf("MillisBehindLatest %d with 20 records of 60 ms left", *out.MillisBehindLatest)
	}
	out, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	must(t, err)
	if len(out.Records) != 20 || *out.MillisBehindLatest != 0 || out.NextShardIterator == nil || out.ChildShards != nil {
		t.Fatalf("%d records, behind %d", len(out.Records), *out.MillisBehindLatest)
	}
	for _, lim := range []int32{0, 10001} {
		_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(lim)})
		wantCode(t, err, CodeValidation)
	}
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")})
	wantCode(t, err, CodeInvalidArgument)
}

func TestGetRecordsTenMiB(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	blob := bytes.Repeat([]byte{'x'}, 1<<20-2) // with the key "pk", 1 MiB a record
	must(t, s.PutToShard("s", "shardId-000000000000", 12, func(int) []byte { return blob }))
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	must(t, err)
	if len(out.Records) != 10 {
		t.Fatalf("%d records of 1 MiB in one response, want 10", len(out.Records))
	}
}

func TestIteratorExpiry(t *testing.T) {
	// The clock stands still until the test moves it on: the first
	// GetRecords is within the lifetime however slow the calls are.
	clock := newFakeClock()
	s := newServer(t, Stream("s", 1), Quotas(false), IteratorLifetime(100*time.Millisecond), withClock(clock))
	c := newClient(s)
	ctx := testCtx(t)
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	must(t, err)
	clock.advance(150 * time.Millisecond)
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	wantCode(t, err, CodeExpiredIterator)
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantCode(t, err, CodeExpiredIterator)

	// A fresh iterator of a deleted stream is not found.
	it, err = c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	must(t, err)
	must(t, s.DeleteStream("s"))
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	wantCode(t, err, CodeResourceNotFound)
}
