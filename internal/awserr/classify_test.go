package awserr

import (
	"context"
	"errors"
	"fmt"
	"io"
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
