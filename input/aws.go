package input

import (
	"context"
	"fmt"
	"net/http"

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
	if c.TLS != nil {
		opts = append(opts, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = c.TLS.Clone()
			tr.ForceAttemptHTTP2 = true // a custom TLS config turns HTTP/2 off unless forced; fan-out needs it
		})))
	}
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

// kinesisClient builds the Kinesis client of the input.
func kinesisClient(cfg aws.Config, c config) *kinesis.Client {
	return kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
}
