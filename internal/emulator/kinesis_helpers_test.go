package emulator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// putRecord is a record the test wrote and where Kinesis put it.
type putRecord struct {
	shard, seq, data string
}

// waitFor calls check every 100 ms until it reports done, fails or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, check func() (bool, error)) {
	t.Helper()
	for {
		done, err := check()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitStreamActive(ctx context.Context, t *testing.T, c *kinesis.Client, stream string) {
	t.Helper()
	waitFor(ctx, t, "stream "+stream+" ACTIVE", func() (bool, error) {
		out, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		var notFound *types.ResourceNotFoundException
		if errors.As(err, &notFound) { // INITIALIZE_STREAMS may not have run yet
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive, nil
	})
}

func createStream(ctx context.Context, t *testing.T, c *kinesis.Client, stream string, shards int32) {
	t.Helper()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatalf("CreateStream %s: %v", stream, err)
	}
	waitStreamActive(ctx, t, c, stream)
}

// putRecords writes n records with distinct partition keys (so that they
// spread over the shards) in batches of 100.
func putRecords(ctx context.Context, t *testing.T, c *kinesis.Client, stream string, n int) []putRecord {
	t.Helper()
	var put []putRecord
	for start := 0; start < n; start += 100 {
		var entries []types.PutRecordsRequestEntry
		for i := start; i < min(n, start+100); i++ {
			entries = append(entries, types.PutRecordsRequestEntry{
				Data:         fmt.Appendf(nil, "record-%04d", i),
				PartitionKey: aws.String(fmt.Sprintf("key-%d", i)),
			})
		}
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			t.Fatalf("PutRecords: %v", err)
		}
		if aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("PutRecords: %d records failed", aws.ToInt32(out.FailedRecordCount))
		}
		for i, r := range out.Records {
			put = append(put, putRecord{shard: aws.ToString(r.ShardId), seq: aws.ToString(r.SequenceNumber), data: string(entries[i].Data)})
		}
	}
	return put
}

func shardIDs(ctx context.Context, t *testing.T, c *kinesis.Client, stream string) []string {
	t.Helper()
	out, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatalf("ListShards: %v", err)
	}
	var ids []string
	for _, s := range out.Shards {
		ids = append(ids, aws.ToString(s.ShardId))
	}
	return ids
}

// registerConsumer registers a stream consumer and waits until it is ACTIVE.
func registerConsumer(ctx context.Context, t *testing.T, c *kinesis.Client, streamARN, name string) string {
	t.Helper()
	out, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)})
	if err != nil {
		t.Fatalf("RegisterStreamConsumer: %v", err)
	}
	arn := aws.ToString(out.Consumer.ConsumerARN)
	waitFor(ctx, t, "consumer "+name+" ACTIVE", func() (bool, error) {
		d, err := c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err != nil {
			return false, err
		}
		return d.ConsumerDescription.ConsumerStatus == types.ConsumerStatusActive, nil
	})
	return arn
}

// assertExactlyOnce checks that got holds every record of want once, with
// the data and shard it was written with, and nothing else.
func assertExactlyOnce(t *testing.T, want, got []putRecord) {
	t.Helper()
	wantBySeq := map[string]putRecord{}
	for _, r := range want {
		wantBySeq[r.shard+"/"+r.seq] = r
	}
	seen := map[string]int{}
	for _, r := range got {
		key := r.shard + "/" + r.seq
		seen[key]++
		w, ok := wantBySeq[key]
		switch {
		case !ok:
			t.Errorf("unexpected record %s %q", key, r.data)
		case w.data != r.data:
			t.Errorf("record %s: data %q, want %q", key, r.data, w.data)
		}
	}
	var missing, dup []string
	for key := range wantBySeq {
		switch seen[key] {
		case 0:
			missing = append(missing, key)
		case 1:
		default:
			dup = append(dup, fmt.Sprintf("%s x%d", key, seen[key]))
		}
	}
	sort.Strings(missing)
	sort.Strings(dup)
	if len(missing) > 0 || len(dup) > 0 {
		t.Fatalf("%d of %d records missing %v; duplicates %v", len(missing), len(want), missing, dup)
	}
}
