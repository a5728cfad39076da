package awsclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

func TestParseStreamRef(t *testing.T) {
	for _, c := range []struct {
		in, name, arn, region, err string
	}{
		{in: "orders", name: "orders"},
		{in: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", name: "orders", arn: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", region: "eu-west-1"},
		{in: "arn:aws:kinesis:eu-west-1:12:stream/orders", err: `"arn:aws:kinesis:eu-west-1:12:stream/orders": not a Kinesis stream ARN`},
		{in: "or ders", err: `"or ders": not a stream name`},
	} {
		ref, region, err := ParseStreamRef(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || ref.Name != c.name || ref.ARN != c.arn || region != c.region {
			t.Errorf("%q: %+v %q %v", c.in, ref, region, err)
		}
	}
}

// TestLoadWithoutRegion: no region anywhere is ErrNoRegion, which the input
// and the commands word in their own terms (a field, a flag).
func TestLoadWithoutRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, err := Load(context.Background(), Settings{}); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("Load without a region: %v, want ErrNoRegion", err)
	}
	cfg, err := Load(context.Background(), Settings{Region: "eu-west-1", ID: "a", Secret: "b"})
	if err != nil || cfg.Region != "eu-west-1" {
		t.Fatalf("Load with a region: %v %v", cfg.Region, err)
	}
}

// TestSilentEndpointFailsWithinTheDeadline: a Kinesis or DynamoDB endpoint
// that takes the connection and never answers fails each call at the
// deadline with a NoAnswerError naming the endpoint and the operation
// (before, DescribeStreamSummary, DescribeTable and every other call waited
// for ever on a context that never ends, saying nothing). The password of
// the endpoint's URL is not in the error.
func TestSilentEndpointFailsWithinTheDeadline(t *testing.T) {
	t.Parallel()
	silent := emulator.Blackhole(t)
	endpoint := strings.Replace(silent, "http://", "http://user:hunter2@", 1)
	cfg, err := Load(context.Background(), Settings{Region: "us-east-1", ID: "a", Secret: "b"})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	calls := map[string]func() error{
		"Kinesis: DescribeStreamSummary": func() error {
			_, err := Kinesis(cfg, endpoint, CallTimeout(timeout)).DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")})
			return err
		},
		"DynamoDB: DescribeTable": func() error {
			_, err := DynamoDB(cfg, endpoint, CallTimeout(timeout)).DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("leases")})
			return err
		},
	}
	for what, call := range calls {
		start := time.Now()
		err := call()
		took := time.Since(start)
		var na *NoAnswerError
		if !errors.As(err, &na) {
			t.Fatalf("%s: %v, want a NoAnswerError", what, err)
		}
		if took < timeout || took > timeout+2*time.Second {
			t.Errorf("%s failed after %v, want about %v", what, took, timeout)
		}
		msg := err.Error()
		for _, want := range []string{what, "no answer from " + silent + " within 300ms"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q lacks %q", what, msg, want)
			}
		}
		if strings.Contains(msg, "hunter2") {
			t.Errorf("%s: error %q shows the endpoint's password", what, msg)
		}
		if c := awserr.Classify(err); c != awserr.Recoverable {
			t.Errorf("%s: class %v, want recoverable (retried, never fatal)", what, c)
		}
	}
}

// TestSubscribeToShardOutlivesTheCallDeadline: a fan-out subscription is a
// stream of events for minutes, so the call deadline does not apply to it
// (efo.Options.Watchdog bounds its answer): against a silent endpoint it
// waits for the caller's context, not the client's deadline.
func TestSubscribeToShardOutlivesTheCallDeadline(t *testing.T) {
	t.Parallel()
	silent := emulator.Blackhole(t)
	cfg, err := Load(context.Background(), Settings{Region: "us-east-1", ID: "a", Secret: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = Kinesis(cfg, silent, CallTimeout(100*time.Millisecond)).SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/app:1"), ShardId: aws.String("shardId-000000000000"),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest},
	})
	if err == nil || IsNoAnswer(err) || ctx.Err() == nil {
		t.Fatalf("SubscribeToShard: %v (caller's context: %v), want it to wait for the caller's context", err, ctx.Err())
	}
}

func TestCheckEndpointAndRegion(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"http://127.0.0.1:4568", "https://kinesis.us-east-1.amazonaws.com"} {
		if err := CheckEndpoint(ok); err != nil {
			t.Errorf("CheckEndpoint(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://x", "localhost:8000", "http://", "http://user:hunter2@%zz"} {
		err := CheckEndpoint(bad)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckEndpoint(%q): %v, want an error without the password", bad, err)
		}
	}
	for _, ok := range []string{"us-east-1", "us-gov-west-1", "cn-north-1"} {
		if err := CheckRegion(ok); err != nil {
			t.Errorf("CheckRegion(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"us east 1", "US-EAST-1", "us-east-1.", "-us", strings.Repeat("a", 64)} {
		if err := CheckRegion(bad); err == nil {
			t.Errorf("CheckRegion(%q) passed", bad)
		}
	}
	// Only a password is changed: before, "not a url" read not%20a%20url.
	for in, want := range map[string]string{
		"http://user:hunter2@127.0.0.1:1": "http://user:xxxxx@127.0.0.1:1",
		"not a url":                       "not a url",
		"http://host/a b":                 "http://host/a b",
		"http://user@host":                "http://user@host",
		"ftp://user:hunter2@x y":          "ftp://xxxxx@x y",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAnsweringEndpointIsNotCalledSilent: an endpoint that answers, only
// with failures the SDK retries until the deadline passes, is not reported
// as one that never answers: the caller gets the SDK's own error.
// GetRecords is bounded by the polling reader, not here: a large answer on
// a slow link must not be cut at the client's deadline.
//
// Before, every call cut by the deadline was "no answer from ...", also
// after throttling answers, and GetRecords was cut at 20 s.
func TestAnsweringEndpointIsNotCalledSilent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"__type":"ServiceUnavailable","message":"busy"}`))
	}))
	t.Cleanup(srv.Close)
	cfg, err := Load(context.Background(), Settings{Region: "us-east-1", ID: "a", Secret: "b"})
	if err != nil {
		t.Fatal(err)
	}
	client := Kinesis(cfg, srv.URL, CallTimeout(250*time.Millisecond))
	_, err = client.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")})
	if err == nil || IsNoAnswer(err) {
		t.Errorf("an endpoint that answered with failures: %v, want the SDK's error, not a NoAnswerError", err)
	}

	silent := emulator.Blackhole(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = Kinesis(cfg, silent, CallTimeout(100*time.Millisecond)).GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("x")})
	if IsNoAnswer(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetRecords was cut by the client's deadline: %v, want the caller's own deadline", err)
	}
}

// TestOnErrorSeesEachFailedCallOnce: a client built with OnError reports
// each failed call once, after the SDK's retries, with its service and
// operation and the error its caller gets; calls that succeed are not
// reported.
func TestOnErrorSeesEachFailedCallOnce(t *testing.T) {
	t.Parallel()
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".ListStreams") {
			_, _ = w.Write([]byte(`{"StreamNames":[],"HasMoreStreams":false}`))
			return
		}
		attempts.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"__type":"InternalFailure","message":"down"}`))
	}))
	t.Cleanup(srv.Close)
	cfg, err := Load(context.Background(), Settings{Region: "us-east-1", ID: "a", Secret: "b"})
	if err != nil {
		t.Fatal(err)
	}
	type report struct{ service, op string }
	var mu sync.Mutex
	var got []report
	var gotErr error
	client := Kinesis(cfg, srv.URL, OnError(func(service, op string, err error) {
		mu.Lock()
		defer mu.Unlock()
		got, gotErr = append(got, report{service, op}), err
	}))
	if _, err := client.ListStreams(context.Background(), &kinesis.ListStreamsInput{}); err != nil {
		t.Fatal(err)
	}
	_, err = client.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")})
	mu.Lock()
	defer mu.Unlock()
	if want := []report{{"Kinesis", "DescribeStreamSummary"}}; !slices.Equal(got, want) || err == nil || !errors.Is(err, gotErr) {
		t.Errorf("reported %v (%v), want %v with the error the caller got, %v", got, gotErr, want, err)
	}
	if n := attempts.Load(); n < 2 {
		t.Errorf("%d attempts: the SDK did not retry, so the test shows nothing of once per call", n)
	}
}
