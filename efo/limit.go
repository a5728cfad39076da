package efo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// The consumers a stream takes: 20, or 50 on an account with On-demand
// Advantage (an account setting since late 2025, which DescribeAccountSettings
// reports as a minimum throughput billing commitment).
const (
	ConsumerLimit          = 20
	ConsumerLimitAdvantage = 50
)

// consumerLister lists a stream's consumers. It is asked for only once a
// registration was refused with LimitExceededException (ListStreamConsumers
// has a quota of 5 calls a second per stream: starting instances never call
// it); *kinesis.Client has it.
type consumerLister interface {
	ListStreamConsumers(ctx context.Context, in *kinesis.ListStreamConsumersInput, optFns ...func(*kinesis.Options)) (*kinesis.ListStreamConsumersOutput, error)
}

// accountDescriber tells whether the account has On-demand Advantage;
// *kinesis.Client has it.
type accountDescriber interface {
	DescribeAccountSettings(ctx context.Context, in *kinesis.DescribeAccountSettingsInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeAccountSettingsOutput, error)
}

// streamFull tells whether a registration refused with
// LimitExceededException was refused because the stream has all the
// consumers it takes (rather than for the account's 5 consumers CREATING at
// once, or the call rate: both pass). When it was, it words what the user
// can do: which limit applies, and which consumers are registered.
func streamFull(ctx context.Context, api ConsumerAPI, streamARN, name string) (string, bool) {
	lister, ok := api.(consumerLister)
	if !ok {
		return "", false
	}
	var consumers []types.Consumer
	in := &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)}
	for {
		out, err := lister.ListStreamConsumers(ctx, in)
		if err != nil {
			return "", false // not known: the registration is retried
		}
		consumers = append(consumers, out.Consumers...)
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), NextToken: out.NextToken}
	}
	n := len(consumers)
	if n < ConsumerLimit {
		return "", false
	}
	limit := fmt.Sprintf("%d a stream, or %d on an account with On-demand Advantage", ConsumerLimit, ConsumerLimitAdvantage)
	switch advantage, known := hasAdvantage(ctx, api); {
	case n >= ConsumerLimitAdvantage || known && advantage:
		limit = fmt.Sprintf("%d a stream, the limit of an account with On-demand Advantage", ConsumerLimitAdvantage)
	case known:
		limit = fmt.Sprintf("%d a stream; an account with On-demand Advantage may register %d", ConsumerLimit, ConsumerLimitAdvantage)
	}
	names := make([]string, 0, n)
	for _, c := range consumers {
		names = append(names, fmt.Sprintf("%s (%s)", aws.ToString(c.ConsumerName), c.ConsumerStatus))
	}
	slices.Sort(names)
	return fmt.Sprintf("the stream has %d consumers registered, as many as it takes (%s): %s. Deregister one no longer read (benthos-kinesis efo deregister --stream %s --consumer-name NAME), or read through one of them (registration: none with its consumer_arn); %s is not registered",
		n, limit, strings.Join(names, ", "), streamARN, name), true
}

// hasAdvantage asks whether the account has On-demand Advantage; known is
// false when it cannot tell (the call refused or not available).
func hasAdvantage(ctx context.Context, api ConsumerAPI) (advantage, known bool) {
	d, ok := api.(accountDescriber)
	if !ok {
		return false, false
	}
	out, err := d.DescribeAccountSettings(ctx, &kinesis.DescribeAccountSettingsInput{})
	if err != nil {
		return false, false
	}
	c := out.MinimumThroughputBillingCommitment
	if c == nil {
		return false, true
	}
	return c.Status == types.MinimumThroughputBillingCommitmentOutputStatusEnabled ||
		c.Status == types.MinimumThroughputBillingCommitmentOutputStatusEnabledUntilEarliestAllowedEnd, true
}
