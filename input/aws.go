package input

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// awsConfig loads the SDK configuration that the credentials and tls fields
// describe.
func awsConfig(ctx context.Context, c config) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	if c.Creds.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Creds.Profile))
	}
	if c.Creds.ID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			awscreds.NewStaticCredentialsProvider(c.Creds.ID, c.Creds.Secret, c.Creds.Token)))
	}
	opts = append(opts, awsconfig.WithHTTPClient(httpClient(c)))
	// The readers run their own retry loops with jitter and per-shard limits;
	// the SDK retries each call a little, and never refuses a call because a
	// client-wide retry budget ran out.
	opts = append(opts, awsconfig.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.RateLimiter = ratelimit.None
		})
	}))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return cfg, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return cfg, fmt.Errorf("field %s: no region is set, none is in a stream ARN and the AWS SDK found none (AWS_REGION, shared config): set region, e.g. us-east-1", fRegion)
	}
	if c.Creds.Role != "" {
		provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), c.Creds.Role, func(o *stscreds.AssumeRoleOptions) {
			if c.Creds.RoleExternalID != "" {
				o.ExternalID = aws.String(c.Creds.RoleExternalID)
			}
			o.RoleSessionName = "benthos-kinesis"
		})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	return cfg, nil
}

// Flow control of the HTTP/2 streams that carry fan-out subscriptions.
const (
	// streamWindow bounds what one subscription buffers unread in the
	// transport while the pipeline is slow: the server stops sending when it
	// is full. 1 MiB is half a second of a shard's 2 MiB/s, far more than
	// the bandwidth-delay product to a regional endpoint.
	streamWindow = 1 << 20
	// pingAfter and pingTimeout detect a dead connection (no frame at all
	// for pingAfter, then no answer to a ping) and close it, failing every
	// call and subscription on it instead of letting them hang.
	pingAfter   = 15 * time.Second
	pingTimeout = 10 * time.Second
)

// httpClient is the SDK's HTTP client with HTTP/2 tuned for fan-out: a
// bounded stream window (memory stays bounded when the output is slow; the
// connection window stays large so one stalled shard never blocks others on
// the same connection), dead-connection detection, and the tls field.
func httpClient(c config) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if c.TLS != nil {
			tr.TLSClientConfig = c.TLS.Clone()
		}
		tr.ForceAttemptHTTP2 = true // a custom TLS config turns HTTP/2 off unless forced
		tr.HTTP2 = &http.HTTP2Config{
			MaxReceiveBufferPerStream: streamWindow,
			SendPingTimeout:           pingAfter,
			PingTimeout:               pingTimeout,
		}
	})
}

// kinesisClient builds the Kinesis client of the input.
func kinesisClient(cfg aws.Config, c config) *kinesis.Client {
	return kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
}
