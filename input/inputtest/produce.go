package inputtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Produced is what a test wrote: data -> partition key.
type Produced map[string]string

// Produce writes n records to a stream in PutRecords calls of up to 500, with
// data "<prefix>-<index>" and partition keys spread over keys values.
func Produce(t testing.TB, client *kinesis.Client, streamName, prefix string, n, keys int) Produced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := Produced{}
	for start := 0; start < n; start += 500 {
		var entries []types.PutRecordsRequestEntry
		for i := start; i < n && i < start+500; i++ {
			data := fmt.Sprintf("%s-%07d", prefix, i)
			pk := fmt.Sprintf("key-%d", i%keys)
			out[data] = pk
			entries = append(entries, types.PutRecordsRequestEntry{Data: []byte(data), PartitionKey: aws.String(pk)})
		}
		for len(entries) > 0 {
			res, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(streamName), Records: entries})
			if err != nil {
				t.Fatalf("putting records: %v", err)
			}
			var retry []types.PutRecordsRequestEntry
			for i, r := range res.Records {
				if r.ErrorCode != nil {
					retry = append(retry, entries[i])
				}
			}
			entries = retry
		}
	}
	return out
}

// CreateStream creates a stream and waits until it is ACTIVE.
func CreateStream(t testing.TB, client *kinesis.Client, name string, shards int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	w := kinesis.NewStreamExistsWaiter(client, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
}
