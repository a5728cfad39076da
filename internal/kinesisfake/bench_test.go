package kinesisfake

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
)

// The benchmarks read a shard of benchRecords records of 100 bytes through the
// real SDK client, once per iteration, and report records per second.
const (
	benchRecords = 100_000
	benchSize    = 100
)

func benchServer(b *testing.B, opts ...Opt) (*Server, *kinesis.Client) {
	s := newServer(b, append(opts, Stream("bench", 1), Quotas(false), SubscribeTakeoverWindow(0))...)
	data := make([]byte, benchSize)
	must(b, s.PutToShard("bench", "shardId-000000000000", benchRecords, func(i int) []byte {
		copy(data, fmt.Sprintf("%08d", i))
		return append([]byte(nil), data...)
	}))
	return s, newClient(s)
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N*benchRecords)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkGetRecords(b *testing.B) {
	for _, mode := range []string{"http1", "tls-h2"} {
		b.Run(mode, func(b *testing.B) {
			var opts []Opt
			if mode == "tls-h2" {
				opts = append(opts, TLS())
			}
			_, c := benchServer(b, opts...)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("bench"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				must(b, err)
				next, n := it.ShardIterator, 0
				for n < benchRecords {
					out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: next})
					must(b, err)
					n += len(out.Records)
					next = out.NextShardIterator
				}
			}
			reportRate(b, start)
		})
	}
}

func BenchmarkSubscribeToShard(b *testing.B) {
	for _, mode := range []string{"http1", "tls-h2"} {
		b.Run(mode, func(b *testing.B) {
			var opts []Opt
			if mode == "tls-h2" {
				opts = append(opts, TLS())
			}
			s, c := benchServer(b, opts...)
			arn, err := s.RegisterConsumer("bench", "bench")
			must(b, err)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				out, err := c.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String("shardId-000000000000"), StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}}, sdkopt.OwnProtocol)
				must(b, err)
				es := out.GetStream()
				n := 0
				for n < benchRecords {
					ev, ok := <-es.Events()
					if !ok {
						b.Fatalf("stream ended after %d records: %v", n, es.Err())
					}
					n += len(ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value.Records)
				}
				es.Close()
			}
			reportRate(b, start)
		})
	}
}
