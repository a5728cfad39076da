package awserr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"throughput", &types.ProvisionedThroughputExceededException{}, Throttled},
		{"limit", &types.LimitExceededException{}, Throttled},
		{"wrapped limit", fmt.Errorf("subscribe: %w", &types.LimitExceededException{}), Throttled},
		{"internal", &types.InternalFailureException{}, Recoverable},
		{"in use", &types.ResourceInUseException{}, Recoverable},
		{"access denied", &types.AccessDeniedException{}, Fatal},
		{"not found", &types.ResourceNotFoundException{}, Fatal},
		{"invalid argument", &types.InvalidArgumentException{}, Fatal},
		{"kms", &types.KMSAccessDeniedException{}, Fatal},
		{"unknown client error", &smithy.GenericAPIError{Code: "Weird", Fault: smithy.FaultClient}, Retryable},
		{"unknown server error", &smithy.GenericAPIError{Code: "Weird", Fault: smithy.FaultServer}, Recoverable},
		{"send", &smithyhttp.RequestSendError{Err: errors.New("dial tcp: connection refused")}, Recoverable},
		{"eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), Recoverable},
		{"deadline", context.DeadlineExceeded, Recoverable},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), Canceled},
		{"plain", errors.New("no credentials"), Retryable},
		{"http2 reset", fmt.Errorf("decode event: %w", errors.New("stream error: stream ID 13; INTERNAL_ERROR; received from peer")), Recoverable},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestCode(t *testing.T) {
	err := fmt.Errorf("get records: %w", &types.ExpiredIteratorException{Message: new(string)})
	if !Is(err, "ExpiredIteratorException") {
		t.Fatalf("Is did not see the code through wrapping: %q", Code(err))
	}
	if Is(errors.New("x"), "ExpiredIteratorException") || Is(nil, "") {
		t.Fatal("Is matched an error without that code")
	}
}

// TestDecide: the decision per operation, in one table. Throttling counts
// toward the retry limit only for SubscribeToShard; hints name what to fix.
func TestDecide(t *testing.T) {
	cases := []struct {
		op     string
		err    error
		class  Class
		counts bool
		hint   string
	}{
		{"SubscribeToShard", &types.LimitExceededException{}, Throttled, true, "another process subscribing"},
		{"GetRecords", &types.ProvisionedThroughputExceededException{}, Throttled, false, ""},
		{"GetRecords", &smithy.GenericAPIError{Code: "Throttling"}, Throttled, false, ""},
		{"GetRecords", &smithy.GenericAPIError{Code: "BandwidthLimitExceeded"}, Throttled, false, ""},
		{"GetRecords", &smithy.GenericAPIError{Code: "PriorRequestNotComplete"}, Throttled, false, ""},
		{"GetRecords", &smithy.GenericAPIError{Code: "Weird", Fault: smithy.FaultClient}, Retryable, true, ""},
		{"GetRecords", &types.InternalFailureException{}, Recoverable, false, ""},
		{"GetRecords", &types.AccessDeniedException{}, Fatal, false, "kinesis:GetShardIterator and kinesis:GetRecords"},
		{"SubscribeToShard", &types.AccessDeniedException{}, Fatal, false, "kinesis:SubscribeToShard"},
		{"RegisterStreamConsumer", &types.AccessDeniedException{}, Fatal, false, "kinesis:RegisterStreamConsumer"},
		{"DescribeStreamSummary", &types.AccessDeniedException{}, Fatal, false, "kinesis:DescribeStreamSummary"},
		{"GetRecords", &types.KMSDisabledException{}, Fatal, false, "kms:Decrypt"},
		{"GetRecords", &types.ResourceNotFoundException{}, Fatal, false, "retention period"},
		{"SubscribeToShard", &types.ResourceNotFoundException{}, Fatal, false, "deregistered"},
		{"SubscribeToShard", fmt.Errorf("x: %w", context.Canceled), Canceled, false, ""},
	}
	for _, c := range cases {
		d := Decide(c.op, c.err)
		if d.Class != c.class || d.Counts != c.counts || (c.hint == "") != (d.Hint == "") || !strings.Contains(d.Hint, c.hint) {
			t.Errorf("Decide(%s, %v) = %+v, want class %v, counts %v, a hint with %q", c.op, c.err, d, c.class, c.counts, c.hint)
		}
	}
}

func TestNoCredentials(t *testing.T) {
	err := errors.New("operation error Kinesis: DescribeStreamSummary, get identity: get credentials: failed to refresh cached credentials, no EC2 IMDS role found")
	d := Decide("DescribeStreamSummary", err)
	if !NoCredentials(err) || d.Class != Fatal || !strings.Contains(d.Hint, "AWS_ACCESS_KEY_ID") {
		t.Fatalf("no credentials: %v %+v", NoCredentials(err), d)
	}
	if NoCredentials(errors.New("AccessDeniedException: not authorized")) {
		t.Fatal("access denied taken for missing credentials")
	}
}
