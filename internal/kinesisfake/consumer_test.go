package kinesisfake

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestConsumerLifecycle(t *testing.T) {
	// The clock stands still except where the test moves it on, so each
	// status lasts as long as the test needs, however slow the calls are.
	clock := newFakeClock()
	s := newServer(t, Stream("s", 1), ConsumerActivationDelay(3*time.Second), ConsumerDeletionDelay(3*time.Second), Quotas(false), withClock(clock))
	c := newClient(s)
	ctx := testCtx(t)
	streamARN := aws.String(s.StreamARN("s"))

	reg, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app")})
	must(t, err)
	con := reg.Consumer
	if !regexp.MustCompile(`^arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/app:\d{10}$`).MatchString(*con.ConsumerARN) {
		t.Fatalf("consumer ARN %s", *con.ConsumerARN)
	}
	if con.ConsumerStatus != types.ConsumerStatusCreating || con.ConsumerCreationTimestamp == nil || *con.ConsumerName != "app" {
		t.Fatalf("registered %+v", con)
	}
	if !strings.HasSuffix(*con.ConsumerARN, fmt.Sprint(con.ConsumerCreationTimestamp.Unix())) {
		t.Fatalf("ARN %s does not end with the creation time %d", *con.ConsumerARN, con.ConsumerCreationTimestamp.Unix())
	}

	describe := func(in kinesis.DescribeStreamConsumerInput) (types.ConsumerStatus, error) {
		out, err := c.DescribeStreamConsumer(ctx, &in)
		if err != nil {
			return "", err
		}
		if *out.ConsumerDescription.StreamARN != *streamARN || *out.ConsumerDescription.ConsumerARN != *con.ConsumerARN {
			t.Fatalf("description %+v", out.ConsumerDescription)
		}
		return out.ConsumerDescription.ConsumerStatus, nil
	}
	byARN := kinesis.DescribeStreamConsumerInput{ConsumerARN: con.ConsumerARN}
	byName := kinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app")}
	if st, err := describe(byName); err != nil || st != types.ConsumerStatusCreating {
		t.Fatalf("describe by name: %s %v", st, err)
	}
	clock.advance(3*time.Second - time.Millisecond)
	if st, err := describe(byARN); err != nil || st != types.ConsumerStatusCreating {
		t.Fatalf("describe by ARN just before the activation delay: %s %v", st, err)
	}
	clock.advance(time.Millisecond)
	waitActive(t, c, *con.ConsumerARN)
	if st, err := describe(byName); err != nil || st != types.ConsumerStatusActive {
		t.Fatalf("describe by name: %s %v", st, err)
	}

	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app")})
	wantCode(t, err, CodeResourceInUse)

	_, err = c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app")})
	must(t, err)
	if st, err := describe(byARN); err != nil || st != types.ConsumerStatusDeleting {
		t.Fatalf("after deregister: %s %v", st, err)
	}
	_, err = c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: con.ConsumerARN})
	wantCode(t, err, CodeResourceNotFound)
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app")})
	wantCode(t, err, CodeResourceInUse)
	clock.advance(3*time.Second - time.Millisecond)
	if st, err := describe(byARN); err != nil || st != types.ConsumerStatusDeleting {
		t.Fatalf("just before the deletion delay: %s %v", st, err)
	}
	clock.advance(time.Millisecond)
	_, err = describe(byARN)
	wantCode(t, err, CodeResourceNotFound)
	_, err = describe(byName)
	wantCode(t, err, CodeResourceNotFound)
	list, err := c.ListStreamConsumers(ctx, &kinesis.ListStreamConsumersInput{StreamARN: streamARN})
	must(t, err)
	if len(list.Consumers) != 0 {
		t.Fatalf("deleted consumer still listed")
	}
	// The name is free again.
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app")})
	must(t, err)
}

func TestConsumerErrors(t *testing.T) {
	s := newServer(t, Stream("s", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	_, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("nope")), ConsumerName: aws.String("a")})
	wantCode(t, err, CodeResourceNotFound)
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s")), ConsumerName: aws.String("a b")})
	wantCode(t, err, CodeValidation)
	_, err = c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s"))})
	wantCode(t, err, CodeInvalidArgument)
	_, err = c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String("arn:aws:kinesis:eu-west-1:000000000000:stream/s/consumer/a:1")})
	wantCode(t, err, CodeResourceNotFound)
	_, err = c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(s.StreamARN("s")), ConsumerName: aws.String("ghost")})
	wantCode(t, err, CodeResourceNotFound)
}

func TestListStreamConsumersPagination(t *testing.T) {
	s := newServer(t, Stream("s", 1), Quotas(false))
	c := newClient(s)
	ctx := testCtx(t)
	for i := range 7 {
		_, err := s.RegisterConsumer("s", fmt.Sprintf("c%d", i))
		must(t, err)
	}
	var names []string
	p := kinesis.NewListStreamConsumersPaginator(c, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(s.StreamARN("s")), MaxResults: aws.Int32(3)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		must(t, err)
		pages++
		for _, con := range out.Consumers {
			names = append(names, *con.ConsumerName)
			if con.ConsumerStatus != types.ConsumerStatusActive {
				t.Fatalf("%s is %s", *con.ConsumerName, con.ConsumerStatus)
			}
		}
		if pages == 1 {
			// A consumer deleted between pages neither shifts nor repeats the
			// listing.
			_, err := c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(s.ConsumerARN("s", "c0"))})
			must(t, err)
		}
	}
	if strings.Join(names, " ") != "c0 c1 c2 c3 c4 c5 c6" || pages != 3 {
		t.Fatalf("%d pages: %v", pages, names)
	}
	expired := s.seal(tokenListConsumers, token{issued: time.Now().Add(-10 * time.Minute), str: "c1"})
	_, err := c.ListStreamConsumers(ctx, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(s.StreamARN("s")), NextToken: aws.String(expired)})
	wantCode(t, err, CodeExpiredNextToken)
}
