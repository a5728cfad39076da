package efo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/backoff"
	"github.com/benthos-kinesis/benthos-kinesis/internal/logging"
)

// Consumer is a registered stream consumer.
type Consumer struct {
	ARN     string
	Name    string
	Status  types.ConsumerStatus
	Created time.Time
}

// WaitOptions tune how registration waits and retries. The zero value of each
// field means its default.
type WaitOptions struct {
	// BackoffInitial and BackoffMax bound the jittered exponential wait
	// between control-plane calls. Defaults 500ms and 10s.
	BackoffInitial, BackoffMax time.Duration
	// Timeout bounds the whole wait for the consumer to become ACTIVE (or, for
	// a consumer being deleted, to disappear). Default 5 minutes.
	Timeout time.Duration
	// Logger receives progress logs; default none.
	Logger logging.Logger
	// Claim, when set, is asked before registering: false means another
	// instance registers the consumer, which is then waited for instead, so
	// that many instances starting together make one RegisterStreamConsumer
	// call. Once ClaimWait has passed with the consumer still absent (the
	// claimant died), Claim is no longer asked. Default: always register.
	Claim func(context.Context) (bool, error)
	// ClaimWait defaults to 30s.
	ClaimWait time.Duration
}

func (o WaitOptions) withDefaults() WaitOptions {
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = 500 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = logging.NopLogger{}
	}
	if o.ClaimWait <= 0 {
		o.ClaimWait = 30 * time.Second
	}
	return o
}

// consumerNameRE is what Kinesis accepts as a stream consumer's name.
var consumerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// CheckConsumerName checks a consumer name against what Kinesis accepts, so
// that a bad one is refused with this error rather than the service's
// (callers add the field or flag).
func CheckConsumerName(name string) error {
	if !consumerNameRE.MatchString(name) {
		return fmt.Errorf("%q: expected a consumer name of 1 to 128 of a-z A-Z 0-9 _ . -", name)
	}
	return nil
}

// errNotRegistered is wrapped by Describe when the consumer does not exist.
var errNotRegistered = errors.New("consumer is not registered")

// IsNotRegistered reports whether Describe failed because the consumer does
// not exist.
func IsNotRegistered(err error) bool { return errors.Is(err, errNotRegistered) }

// Register finds the consumer by name and registers it if it is absent, then
// waits until it is ACTIVE. It is the lazy strategy: many processes may call it
// at once for the same consumer; one registration wins (the others see
// ResourceInUse and wait for the winner's consumer), throttling is retried with
// jitter, and ListStreamConsumers is never called.
func Register(ctx context.Context, api ConsumerAPI, streamARN, name string, opts WaitOptions) (Consumer, error) {
	return waitActive(ctx, api, streamARN, name, true, opts.withDefaults())
}

// ErrConsumerRegistered is returned by RegisterAgain when the consumer that a
// subscription did not find is registered and ACTIVE: what is missing is the
// shard (older than the retention period) or the stream (being deleted).
var ErrConsumerRegistered = errors.New("the consumer is still registered and ACTIVE")

// RegisterAgain is the lazy strategy's answer to a subscription of consumer
// staleARN refused with ResourceNotFound: it describes that consumer and, only
// if it is gone or being deleted, registers it again (as Register does) and
// returns the new one. When it is still ACTIVE the error wraps
// ErrConsumerRegistered and nothing is registered.
func RegisterAgain(ctx context.Context, api ConsumerAPI, streamARN, name, staleARN string, opts WaitOptions) (Consumer, error) {
	out, err := api.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(staleARN)})
	switch {
	case err == nil && out.ConsumerDescription != nil && out.ConsumerDescription.ConsumerStatus == types.ConsumerStatusActive:
		return consumerOf(out.ConsumerDescription), fmt.Errorf("consumer %s: %w", staleARN, ErrConsumerRegistered)
	case err != nil && !awserr.Is(err, "ResourceNotFoundException"):
		return Consumer{}, registrationError(fmt.Sprintf("consumer %s", staleARN), "DescribeStreamConsumer", err)
	}
	return Register(ctx, api, streamARN, name, opts)
}

// Describe waits until the consumer, registered beforehand, is ACTIVE. It is
// the eager strategy: it never registers.
func Describe(ctx context.Context, api ConsumerAPI, streamARN, name string, opts WaitOptions) (Consumer, error) {
	return waitActive(ctx, api, streamARN, name, false, opts.withDefaults())
}

// Lookup describes the consumer once, whatever its status. For a consumer
// that does not exist it fails with an error for which IsNotRegistered holds.
func Lookup(ctx context.Context, api ConsumerAPI, streamARN, name string) (*types.ConsumerDescription, error) {
	out, err := api.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String(name),
	})
	if awserr.Is(err, "ResourceNotFoundException") {
		return nil, fmt.Errorf("consumer %s of stream %s: %w", name, streamARN, errNotRegistered)
	}
	if err != nil {
		return nil, err
	}
	if out.ConsumerDescription == nil || out.ConsumerDescription.ConsumerARN == nil {
		return nil, fmt.Errorf("consumer %s of stream %s: the service described it without an ARN", name, streamARN)
	}
	return out.ConsumerDescription, nil
}

func waitActive(ctx context.Context, api ConsumerAPI, streamARN, name string, register bool, opts WaitOptions) (Consumer, error) {
	what := fmt.Sprintf("consumer %s of stream %s", name, streamARN)
	deadline := time.Now().Add(opts.Timeout)
	// bo spaces retries after throttling and errors; poll spaces describes
	// while the consumer is CREATING or DELETING: a short, bounded interval so
	// that every instance sees ACTIVE soon after it happens (8 instances at
	// about 1 call/s each stay well under the 20 calls/s per stream).
	bo := backoff.Backoff{Initial: opts.BackoffInitial, Max: opts.BackoffMax}
	poll := backoff.Backoff{Initial: opts.BackoffInitial, Max: min(opts.BackoffMax, 2*opts.BackoffInitial)}
	status := "not yet described"
	claimUntil := time.Now().Add(opts.ClaimWait)
	waiting := false
	for {
		wait := &bo
		d, err := Lookup(ctx, api, streamARN, name)
		switch {
		case err == nil:
			c := consumerOf(d)
			changed := status != string(c.Status)
			status = string(c.Status)
			switch c.Status {
			case types.ConsumerStatusActive:
				return c, nil
			case types.ConsumerStatusDeleting:
				if !register {
					return c, fmt.Errorf("%s is being deleted (DELETING): register it again once it is gone, or use registration: lazy", what)
				}
				if changed {
					opts.Logger.Warnf("%s is being deleted (DELETING); waiting for it to go, to register it again", what)
				}
				wait = &poll
			default:
				if changed {
					opts.Logger.Infof("%s is %s; waiting for ACTIVE", what, c.Status)
				}
				wait = &poll
			}
		case IsNotRegistered(err):
			if !register {
				return Consumer{}, fmt.Errorf("%w: register it first (benthos-kinesis efo register --stream %s --consumer-name %s), or use registration: lazy", err, streamARN, name)
			}
			status = "absent"
			if opts.Claim != nil && time.Now().Before(claimUntil) {
				won, cerr := opts.Claim(ctx)
				if cerr != nil {
					opts.Logger.Debugf("%s: claiming its registration: %v", what, cerr)
				} else if !won {
					if !waiting {
						opts.Logger.Infof("%s is being registered by another instance; waiting for it", what)
						waiting = true
					}
					status = "absent (registered by another instance)"
					wait = &poll
					break
				}
			}
			rerr := registerOnce(ctx, api, streamARN, name)
			if awserr.Is(rerr, "LimitExceededException") {
				if full, ok := streamFull(ctx, api, streamARN, name); ok {
					return Consumer{}, fmt.Errorf("%s: RegisterStreamConsumer: %w (%s)", what, rerr, full)
				}
			}
			switch {
			case rerr == nil:
				opts.Logger.Infof("registered %s", what)
				status = string(types.ConsumerStatusCreating)
				wait = &poll
			case awserr.Is(rerr, "ResourceInUseException"):
				opts.Logger.Debugf("%s: another process registered it first", what)
				wait = &poll
			case awserr.Classify(rerr) == awserr.Fatal:
				return Consumer{}, registrationError(what, "RegisterStreamConsumer", rerr)
			case awsclient.IsNoAnswer(rerr):
				opts.Logger.Warnf("%s: registering it, retrying: %v", what, rerr)
				status = "absent (registering: " + rerr.Error() + ")"
			default:
				opts.Logger.Debugf("%s: registering: %v", what, rerr)
				status = "absent (registering: " + rerr.Error() + ")"
			}
		case err != nil && awserr.Classify(err) == awserr.Fatal:
			return Consumer{}, registrationError(what, "DescribeStreamConsumer", err)
		case awsclient.IsNoAnswer(err):
			opts.Logger.Warnf("%s: describing it, retrying: %v", what, err)
		case err != nil:
			opts.Logger.Debugf("%s: describing: %v", what, err)
		}
		if time.Now().After(deadline) {
			return Consumer{}, fmt.Errorf("%s did not become ACTIVE within %v (last seen: %s)", what, opts.Timeout, status)
		}
		if err := wait.Wait(ctx); err != nil {
			return Consumer{}, err
		}
	}
}

func registerOnce(ctx context.Context, api ConsumerAPI, streamARN, name string) error {
	_, err := api.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String(name),
	})
	return err
}

func registrationError(what, op string, err error) error {
	if hint := awserr.Decide(op, err).Hint; hint != "" {
		return fmt.Errorf("%s: %s: %w (%s)", what, op, err, hint)
	}
	return fmt.Errorf("%s: %s: %w", what, op, err)
}

// Deregister deletes the consumer. A consumer that is already gone is not an
// error.
func Deregister(ctx context.Context, api ConsumerAPI, consumerARN string) error {
	_, err := api.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(consumerARN)})
	if err != nil && !awserr.Is(err, "ResourceNotFoundException") {
		return fmt.Errorf("deregistering consumer %s: %w", consumerARN, err)
	}
	return nil
}

func consumerOf(d *types.ConsumerDescription) Consumer {
	return Consumer{
		ARN:     aws.ToString(d.ConsumerARN),
		Name:    aws.ToString(d.ConsumerName),
		Status:  d.ConsumerStatus,
		Created: aws.ToTime(d.ConsumerCreationTimestamp),
	}
}
