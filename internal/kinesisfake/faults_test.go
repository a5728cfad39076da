package kinesisfake

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestFailNext(t *testing.T) {
	s := newServer(t, Stream("s", 1))
	c := newClient(s)
	ctx := testCtx(t)
	put := func(c *kinesis.Client) error {
		_, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
		return err
	}
	cases := []struct {
		code   string
		status int
	}{
		{CodeProvisionedThroughput, 400},
		{CodeInternalFailure, 500},
		{CodeServiceUnavailable, 503},
		{CodeAccessDenied, 400},
	}
	for _, tc := range cases {
		s.FailNext("PutRecord", 1, tc.code)
		err := put(c)
		wantCode(t, err, tc.code)
		if got := httpStatus(err); got != tc.status {
			t.Errorf("%s: HTTP %d, want %d", tc.code, got, tc.status)
		}
		must(t, put(c))
	}
	if s.Throttled("PutRecord") != 0 {
		t.Fatalf("injected throttles were counted as quota throttles")
	}
	// The SDK's standard retryer gets through two injected 500s.
	before := s.Calls("PutRecord")
	s.FailNext("PutRecord", 2, CodeInternalFailure)
	retrying := s.NewClient()
	must(t, put(retrying))
	if n := s.Calls("PutRecord") - before; n != 3 {
		t.Fatalf("%d calls for one put with two failures, want 3", n)
	}
	// Queued faults apply in order, to their operation only.
	s.FailNext("GetShardIterator", 1, CodeResourceNotFound)
	s.FailNext("GetShardIterator", 1, CodeInvalidArgument)
	must(t, put(c))
	gsi := func() error {
		_, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeLatest})
		return err
	}
	wantCode(t, gsi(), CodeResourceNotFound)
	wantCode(t, gsi(), CodeInvalidArgument)
	must(t, gsi())
}

func TestDelayNext(t *testing.T) {
	t.Parallel()
	s := newServer(t, Stream("s", 1))
	c := newClient(s)
	ctx := testCtx(t)
	// A delay long enough that the next call, undelayed, is told apart from
	// it with a bound a loaded machine keeps.
	s.DelayNext("DescribeStreamSummary", 1, 2*time.Second)
	call := func() time.Duration {
		start := time.Now()
		_, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
		must(t, err)
		return time.Since(start)
	}
	if d := call(); d < 2*time.Second {
		t.Fatalf("delayed call took %v", d)
	}
	if d := call(); d >= time.Second {
		t.Fatalf("next call took %v", d)
	}
}

func TestDropNext(t *testing.T) {
	for _, mode := range []string{"http1", "tls-h2"} {
		t.Run(mode, func(t *testing.T) {
			opts := []Opt{Stream("s", 1)}
			if mode == "tls-h2" {
				opts = append(opts, TLS())
			}
			s := newServer(t, opts...)
			c := newClient(s)
			ctx := testCtx(t)
			s.DropNext("ListShards", 1)
			_, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
			if err == nil || errCode(err) != "" {
				t.Fatalf("dropped call: %v", err)
			}
			_, err = c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
			must(t, err)
			if s.Calls("ListShards") != 2 {
				t.Fatalf("Calls = %d", s.Calls("ListShards"))
			}
		})
	}
}

func TestControl(t *testing.T) {
	s := newServer(t, Stream("s", 1))
	c := newClient(s)
	ctx := testCtx(t)
	var seen atomic.Int32
	remove := s.Control("DescribeStreamSummary", func(r *Request) (bool, int, []byte) {
		seen.Add(1)
		if !bytes.Contains(r.Body, []byte(`"s"`)) || r.Op != "DescribeStreamSummary" {
			t.Errorf("control saw %s %s", r.Op, r.Body)
		}
		status, body := ErrorBody(CodeLimitExceeded, "slow down")
		return true, status, body
	})
	_, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	wantCode(t, err, CodeLimitExceeded)
	if !strings.Contains(err.Error(), "slow down") {
		t.Fatalf("message lost: %v", err)
	}
	remove()
	_, err = c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	must(t, err)
	if seen.Load() != 1 {
		t.Fatalf("control ran %d times", seen.Load())
	}

	// A control for every operation that answers some calls and lets the
	// rest through.
	var ops atomic.Int32
	defer s.Control("", func(r *Request) (bool, int, []byte) {
		ops.Add(1)
		if r.Op == "ListStreams" {
			return true, http.StatusOK, []byte(`{"StreamNames":["made-up"],"HasMoreStreams":false}`)
		}
		return false, 0, nil
	})()
	out, err := c.ListStreams(ctx, &kinesis.ListStreamsInput{})
	must(t, err)
	if len(out.StreamNames) != 1 || out.StreamNames[0] != "made-up" {
		t.Fatalf("ListStreams %v", out.StreamNames)
	}
	_, err = c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	must(t, err)
	if ops.Load() != 2 {
		t.Fatalf("catch-all control ran %d times", ops.Load())
	}
}

func TestSubscriptionFaults(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"http1", "tls-h2"} {
		t.Run(mode, func(t *testing.T) {
			opts := []Opt{Stream("s", 2), SubscriptionHeartbeat(40 * time.Millisecond), SubscribeTakeoverWindow(0), Quotas(false)}
			if mode == "tls-h2" {
				opts = append(opts, TLS())
			}
			s := newServer(t, opts...)
			c := newClient(s)
			arn, err := s.RegisterConsumer("s", "app")
			must(t, err)
			const shard = "shardId-000000000000"

			countEvents := func(es *kinesis.SubscribeToShardEventStream) (int, error) {
				n := 0
				for {
					select {
					case _, open := <-es.Events():
						if !open {
							return n, es.Err()
						}
						n++
					case <-time.After(5 * time.Second):
						t.Fatal("stream did not end")
					}
				}
			}

			t.Run("FailNext", func(t *testing.T) {
				s.FailNext("SubscribeToShard", 1, CodeInternalFailure)
				_, err := subscribe(t, c, arn, shard, trimHorizon())
				wantCode(t, err, CodeInternalFailure)
			})
			t.Run("DropNext", func(t *testing.T) {
				s.DropNext("SubscribeToShard", 1)
				_, err := subscribe(t, c, arn, shard, trimHorizon())
				if err == nil || errCode(err) != "" {
					t.Fatalf("dropped subscribe: %v", err)
				}
			})
			t.Run("exception after 2 events", func(t *testing.T) {
				s.FailSubscriptionAfter(shard, 1, 2, CodeInternalFailure)
				es, err := subscribe(t, c, arn, shard, trimHorizon())
				must(t, err)
				n, err := countEvents(es)
				if n != 2 {
					t.Fatalf("%d events before the exception", n)
				}
				wantCode(t, err, CodeInternalFailure)
			})
			t.Run("drop after 3 events", func(t *testing.T) {
				s.DropSubscriptionAfter("", 1, 3)
				es, err := subscribe(t, c, arn, shard, trimHorizon())
				must(t, err)
				n, err := countEvents(es)
				if n != 3 {
					t.Fatalf("%d events before the drop", n)
				}
				// HTTP/2 reports the reset stream; over HTTP/1.1 the SDK
				// takes the cut connection for the end of the stream.
				if mode == "tls-h2" && err == nil {
					t.Fatal("no error after the stream was reset")
				}
				t.Logf("after drop: %v", err)
			})
			t.Run("stall after 1 event", func(t *testing.T) {
				s.StallSubscriptionAfter(shard, 1, 1, 400*time.Millisecond)
				// start is taken before the subscribe: the server sends
				// event 1 after it and event 2 at least 400 ms after event
				// 1, however late event 1 reaches the test.
				start := time.Now()
				es, err := subscribe(t, c, arn, shard, trimHorizon())
				must(t, err)
				nextEvent(t, es, 2*time.Second)
				nextEvent(t, es, 2*time.Second)
				if d := time.Since(start); d < 400*time.Millisecond {
					t.Fatalf("stalled for %v only", d)
				}
				// Then it carries on, heartbeats included.
				nextEvent(t, es, time.Second)
			})
			t.Run("fault for another shard", func(t *testing.T) {
				s.FailSubscriptionAfter("shardId-000000000001", 1, 0, CodeInternalFailure)
				es, err := subscribe(t, c, arn, shard, trimHorizon())
				must(t, err)
				for range 3 {
					nextEvent(t, es, time.Second)
				}
				es.Close()
				es, err = subscribe(t, c, arn, "shardId-000000000001", trimHorizon())
				must(t, err)
				n, err := countEvents(es)
				if n != 0 {
					t.Fatalf("%d events", n)
				}
				wantCode(t, err, CodeInternalFailure)
			})
			waitFor(t, "subscriptions to end", 5*time.Second, func() bool { return s.Subscriptions() == 0 })
		})
	}
}
