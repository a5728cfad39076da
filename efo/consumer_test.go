package efo

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/logging"
)

// silentThenActive answers DescribeStreamConsumer with silent the first
// times, then with an ACTIVE consumer.
type silentThenActive struct {
	ConsumerAPI
	mu     sync.Mutex
	silent int
}

func (s *silentThenActive) DescribeStreamConsumer(context.Context, *kinesis.DescribeStreamConsumerInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silent > 0 {
		s.silent--
		return nil, &awsclient.NoAnswerError{Service: "Kinesis", Operation: "DescribeStreamConsumer", Endpoint: "http://127.0.0.1:9", After: 20 * time.Second, Err: context.DeadlineExceeded}
	}
	return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &types.ConsumerDescription{
		ConsumerARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/app:1"), ConsumerName: aws.String("app"),
		ConsumerStatus: types.ConsumerStatusActive,
	}}, nil
}

// TestSilentEndpointIsWarnedWhileWaitingForTheConsumer: a describe that got
// no answer within the client's deadline is retried and warned about with
// the endpoint. Before, it was a debug line only, and a start waiting for a
// silent endpoint said nothing at the default log level.
func TestSilentEndpointIsWarnedWhileWaitingForTheConsumer(t *testing.T) {
	t.Parallel()
	api := &silentThenActive{silent: 2}
	logs := &logging.Recorder{}
	c, err := Describe(context.Background(), api, "arn:aws:kinesis:us-east-1:123456789012:stream/s", "app", WaitOptions{BackoffInitial: time.Millisecond, Logger: logs})
	if err != nil || c.Status != types.ConsumerStatusActive {
		t.Fatalf("Describe: %+v, %v", c, err)
	}
	if warns := logs.Warnings(); len(warns) != 2 || !strings.Contains(warns[0], "no answer from http://127.0.0.1:9") {
		t.Fatalf("warnings %q, want 2 naming the endpoint", warns)
	}
}

func TestCheckConsumerName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"app", "orders-to-s3.v2_x", strings.Repeat("a", 128)} {
		if err := CheckConsumerName(ok); err != nil {
			t.Errorf("CheckConsumerName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "my app", "a/b", strings.Repeat("a", 129)} {
		if err := CheckConsumerName(bad); err == nil {
			t.Errorf("CheckConsumerName(%q) passed", bad)
		}
	}
}
