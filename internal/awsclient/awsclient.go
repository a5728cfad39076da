// Package awsclient builds the AWS SDK configuration and Kinesis client that
// the input and the binary's commands share, and finds streams: one place for
// credentials, the HTTP/2 tuning fan-out needs, stream names and ARNs, and
// the describe call that checks a stream exists.
package awsclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
)

// Settings say how to reach AWS. The zero value of each field means the AWS
// SDK's default (environment, shared config, instance role).
type Settings struct {
	Region   string
	Endpoint string      // a custom Kinesis endpoint URL
	TLS      *tls.Config // nil: the SDK's default transport

	Profile              string // of the shared config
	ID, Secret, Token    string // static credentials
	Role, RoleExternalID string // a role to assume
}

// ErrNoRegion: neither the settings nor the SDK's defaults name a region.
var ErrNoRegion = errors.New("no region is set and the AWS SDK found none (AWS_REGION, shared config)")

// Load loads the SDK configuration that s describes.
func Load(ctx context.Context, c Settings) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	if c.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Profile))
	}
	if c.ID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			awscreds.NewStaticCredentialsProvider(c.ID, c.Secret, c.Token)))
	}
	opts = append(opts, awsconfig.WithHTTPClient(httpClient(c.TLS)))
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
		return cfg, ErrNoRegion
	}
	if err := CheckRegion(cfg.Region); err != nil {
		return cfg, fmt.Errorf("region %w", err)
	}
	if c.Role != "" {
		// Its calls are made within those of Kinesis and DynamoDB (credentials
		// are fetched as a call is signed), bounded like them.
		stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) {
			o.APIOptions = append(o.APIOptions, deadline(KinesisCallTimeout, "the STS endpoint of region "+cfg.Region))
		})
		provider := stscreds.NewAssumeRoleProvider(stsClient, c.Role, func(o *stscreds.AssumeRoleOptions) {
			if c.RoleExternalID != "" {
				o.ExternalID = aws.String(c.RoleExternalID)
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
	// the bandwidth-delay product to a regional endpoint. Under a memory
	// limit, StreamWindows gives smaller ones when many shards read.
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
// the same connection), dead-connection detection, and the TLS settings.
func httpClient(tlsConf *tls.Config) *awshttp.BuildableClient {
	return httpClientWindow(tlsConf, streamWindow)
}

// httpClientWindow is httpClient with the given stream window.
func httpClientWindow(tlsConf *tls.Config, window int64) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tlsConf != nil {
			tr.TLSClientConfig = tlsConf.Clone()
		}
		tr.ForceAttemptHTTP2 = true // a custom TLS config turns HTTP/2 off unless forced
		tr.HTTP2 = &http.HTTP2Config{
			MaxReceiveBufferPerStream: int(window),
			SendPingTimeout:           pingAfter,
			PingTimeout:               pingTimeout,
		}
	})
}

// Kinesis builds a Kinesis client, for a custom endpoint when one is set,
// decoding records with sdkopt.FastRecords. Each of its calls but
// SubscribeToShard is bounded by KinesisCallTimeout (see CallTimeout).
func Kinesis(cfg aws.Config, endpoint string, opts ...Option) *kinesis.Client {
	o := resolve(KinesisCallTimeout, opts)
	return kinesis.NewFromConfig(cfg, sdkopt.FastRecords, func(ko *kinesis.Options) {
		if endpoint != "" {
			ko.BaseEndpoint = aws.String(endpoint)
		}
		ko.APIOptions = append(ko.APIOptions, o.apiOptions(describeEndpoint("Kinesis", cfg.Region, endpoint))...)
	})
}

// describeEndpoint names an endpoint for errors: the custom one (password
// redacted), or AWS's of the region.
func describeEndpoint(service, region, endpoint string) string {
	if endpoint != "" {
		return RedactURL(endpoint)
	}
	return fmt.Sprintf("the AWS %s endpoint of region %s", service, region)
}

// StreamRef is a stream as the user named it: by name, or by ARN.
type StreamRef struct {
	Name string // always set
	ARN  string // set when the user gave an ARN
}

func (s StreamRef) String() string {
	if s.ARN != "" {
		return s.ARN
	}
	return s.Name
}

var (
	streamNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
	streamARNRE  = regexp.MustCompile(`^arn:(aws[a-zA-Z-]*):kinesis:([a-z0-9-]+):([0-9]{12}):stream/([a-zA-Z0-9_.-]{1,128})$`)
)

// ParseStreamRef accepts a stream name or a stream ARN, and returns the
// region of an ARN. Its errors name the value and what was expected.
func ParseStreamRef(s string) (StreamRef, string, error) {
	if strings.HasPrefix(s, "arn:") {
		m := streamARNRE.FindStringSubmatch(s)
		if m == nil {
			return StreamRef{}, "", fmt.Errorf("%q: not a Kinesis stream ARN; expected arn:aws:kinesis:<region>:<12-digit account>:stream/<name>", s)
		}
		return StreamRef{Name: m[4], ARN: s}, m[2], nil
	}
	if !streamNameRE.MatchString(s) {
		return StreamRef{}, "", fmt.Errorf("%q: not a stream name (1 to 128 of a-z A-Z 0-9 _ . -) or a stream ARN", s)
	}
	return StreamRef{Name: s}, "", nil
}

// Stream is what DescribeStream finds of a stream.
type Stream struct {
	ARN     string
	Created time.Time
	// AutoPlacement: the stream places records itself
	// (RecordDistributionStrategy AUTO, on-demand streams since 2026):
	// partition keys do not choose shards.
	AutoPlacement bool
	// MaxRecordKiB is the largest record the stream takes, in KiB (1,024
	// to 10,240 since 2025); 1,024 when not reported.
	MaxRecordKiB int
}

// DescribeStream finds a stream and checks that it can be read. where says
// which endpoint was asked and fix what the user sets to name another stream
// (e.g. "field streams"), for the error of a stream that does not exist.
func DescribeStream(ctx context.Context, client *kinesis.Client, ref StreamRef, where, fix string) (Stream, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	if ref.ARN != "" {
		in.StreamARN = aws.String(ref.ARN)
	} else {
		in.StreamName = aws.String(ref.Name)
	}
	out, err := client.DescribeStreamSummary(ctx, in)
	if err != nil {
		switch {
		case awserr.NoCredentials(err):
			return Stream{}, fmt.Errorf("describing stream %s in %s: %s: %w", ref, where, awserr.NoCredentialsHint, err)
		case awserr.Is(err, "ResourceNotFoundException"):
			return Stream{}, fmt.Errorf("stream %s does not exist in %s: create it or fix %s", ref, where, fix)
		case awserr.Is(err, "AccessDeniedException"):
			return Stream{}, fmt.Errorf("stream %s in %s: access denied: %s: %w", ref, where, awserr.Decide("DescribeStreamSummary", err).Hint, err)
		case awserr.Classify(err) == awserr.Recoverable:
			return Stream{}, fmt.Errorf("cannot reach Kinesis in %s to describe stream %s: %w", where, ref, err)
		}
		return Stream{}, fmt.Errorf("describing stream %s in %s: %w", ref, where, err)
	}
	sum := out.StreamDescriptionSummary
	if sum == nil || sum.StreamARN == nil {
		return Stream{}, fmt.Errorf("describing stream %s in %s: the answer holds no stream ARN", ref, where)
	}
	switch status := string(sum.StreamStatus); status {
	case "ACTIVE", "UPDATING":
	default:
		return Stream{}, fmt.Errorf("stream %s in %s is %s, not ACTIVE: waiting for it", ref, where, status)
	}
	kib := int(aws.ToInt32(sum.MaxRecordSizeInKiB))
	if kib <= 0 {
		kib = 1024
	}
	return Stream{
		ARN: *sum.StreamARN, Created: aws.ToTime(sum.StreamCreationTimestamp),
		AutoPlacement: sum.RecordDistributionStrategy == kinesistypes.RecordDistributionStrategyAuto,
		MaxRecordKiB:  kib,
	}, nil
}

// DynamoDB returns a DynamoDB client of cfg, at endpoint when it is set.
// Each of its calls is bounded by DynamoDBCallTimeout (see CallTimeout).
func DynamoDB(cfg aws.Config, endpoint string, opts ...Option) *dynamodb.Client {
	o := resolve(DynamoDBCallTimeout, opts)
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if endpoint != "" {
			do.BaseEndpoint = aws.String(endpoint)
		}
		do.APIOptions = append(do.APIOptions, o.apiOptions(describeEndpoint("DynamoDB", cfg.Region, endpoint))...)
	})
}

// Over returns s with the region and credentials set in o over it, as a
// lease table's settings go over the stream's: a region replaces the
// region; a profile or static keys replace the profile and the keys; a
// role replaces the role and its external id. fromChain starts from no
// credentials of s (the SDK's chain) instead. The endpoint and TLS are s's.
func (s Settings) Over(o Settings, fromChain bool) Settings {
	if o.Region != "" {
		s.Region = o.Region
	}
	if fromChain {
		s.Profile, s.ID, s.Secret, s.Token, s.Role, s.RoleExternalID = "", "", "", "", "", ""
	}
	if o.Profile != "" || o.ID != "" {
		s.Profile, s.ID, s.Secret, s.Token = o.Profile, o.ID, o.Secret, o.Token
	}
	if o.Role != "" {
		s.Role, s.RoleExternalID = o.Role, o.RoleExternalID
	}
	return s
}
