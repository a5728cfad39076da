package awsclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Every Kinesis, DynamoDB and STS call made through the clients of this
// package has a deadline, so that an endpoint that takes the connection and
// never answers (a black-holed address, a hung proxy) fails the call with an
// error naming the endpoint instead of holding the caller for ever: the
// transport has no deadline of its own (a fan-out subscription is a stream
// that lives for minutes), and the callers' contexts often never end
// (Benthos' Connect, the commands).
//
// The deadline covers the whole call, the SDK's own retries included (at
// most 3 attempts, with waits of up to 2 s and 4 s between them after
// throttling or a 5xx), so a silent endpoint is reported once the deadline
// has passed, however many attempts the SDK meant to make; the callers retry
// on their own schedule.
const (
	// KinesisCallTimeout bounds each Kinesis call but SubscribeToShard. A real
	// answer comes within a second: control-plane calls are small, and the
	// largest GetRecords answer (10 MiB) takes 4 s at 20 Mbit/s; with the
	// SDK's retry waits (6 s at most) a call that is answered at all is
	// answered well within 20 s. 20 s leaves the report of a silent endpoint
	// within 30 s.
	KinesisCallTimeout = 20 * time.Second
	// DynamoDBCallTimeout bounds each DynamoDB call, for the same reasons:
	// lease items are small and a Scan page is at most 1 MB. The input bounds
	// its calls further by the lease period (see CallTimeout).
	DynamoDBCallTimeout = 20 * time.Second
)

// exempt are the operations bounded by their callers, not here:
// SubscribeToShard's answer is a stream of events that flows for up to 5
// minutes (the fan-out publisher bounds the wait for its answer and for each
// event: efo.Options.Watchdog), and GetRecords' answer may be large on a
// slow link (the polling reader bounds it by its own CallTimeout and asks
// for about 1 MiB a call).
var exempt = map[string]bool{"SubscribeToShard": true, "GetRecords": true}

// NoAnswerError is a call that got no answer within its deadline. Callers
// that must tell it from other failures use errors.As; it unwraps to the
// SDK's error (itself wrapping context.DeadlineExceeded), so awserr sorts it
// as recoverable.
type NoAnswerError struct {
	Service   string        // "Kinesis", "DynamoDB"
	Operation string        // "DescribeStreamSummary"
	Endpoint  string        // the URL the request went to, password redacted
	After     time.Duration // the deadline
	Err       error
}

func (e *NoAnswerError) Error() string {
	// The SDK puts the service and the operation in front ("operation error
	// Kinesis: DescribeStreamSummary, ..."); what it would say of the
	// deadline itself ("canceled, context deadline exceeded") says less
	// than this.
	return fmt.Sprintf("no answer from %s within %v (the endpoint took the request but did not answer: check that it is a %s endpoint, and that nothing between, such as a proxy or a firewall, holds requests)",
		e.Endpoint, e.After, e.Service)
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// IsNoAnswer reports whether err is, or wraps, a NoAnswerError.
func IsNoAnswer(err error) bool {
	var na *NoAnswerError
	return errors.As(err, &na)
}

// Option adjusts a client built by Kinesis or DynamoDB.
type Option func(*clientOptions)

type clientOptions struct {
	timeout time.Duration
	onError func(service, operation string, err error)
}

// apiOptions are the middleware of a client of these options.
func (o clientOptions) apiOptions(fallback string) []func(*middleware.Stack) error {
	opts := []func(*middleware.Stack) error{deadline(o.timeout, fallback)}
	if o.onError != nil {
		opts = append(opts, reportErrors(o.onError))
	}
	return opts
}

// CallTimeout replaces the default deadline of each call (KinesisCallTimeout,
// DynamoDBCallTimeout) when d is positive.
func CallTimeout(d time.Duration) Option {
	return func(o *clientOptions) {
		if d > 0 {
			o.timeout = d
		}
	}
}

func resolve(def time.Duration, opts []Option) clientOptions {
	o := clientOptions{timeout: def}
	for _, fn := range opts {
		fn(&o)
	}
	return o
}

// sentTo is where a call's last attempt went, recorded by the finalize step
// for the error of the initialize step's deadline, and whether any attempt
// got an answer (then the endpoint is not silent, only slow or failing, and
// the SDK's own error says more).
type sentTo struct {
	url      string
	answered bool
}

type sentToKey struct{}

// deadline returns the stack option that bounds every call of a client by
// timeout. fallback names the endpoint in the error when the call never got
// as far as sending (e.g. stuck fetching credentials).
func deadline(timeout time.Duration, fallback string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		bound := middleware.InitializeMiddlewareFunc("benthos-kinesis/CallDeadline", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			op := middleware.GetOperationName(ctx)
			if exempt[op] {
				return next.HandleInitialize(ctx, in)
			}
			sent := &sentTo{}
			cctx, cancel := context.WithTimeout(context.WithValue(ctx, sentToKey{}, sent), timeout)
			defer cancel() // the answer is read whole before the handler returns
			out, md, err := next.HandleInitialize(cctx, in)
			if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && !sent.answered {
				endpoint := sent.url
				if endpoint == "" {
					endpoint = fallback
				}
				err = &NoAnswerError{Service: middleware.GetServiceID(ctx), Operation: op, Endpoint: endpoint, After: timeout, Err: err}
			}
			return out, md, err
		})
		if err := stack.Initialize.Add(bound, middleware.After); err != nil {
			return err
		}
		record := middleware.FinalizeMiddlewareFunc("benthos-kinesis/RecordEndpoint", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if sent, ok := ctx.Value(sentToKey{}).(*sentTo); ok {
				if req, ok := in.Request.(*smithyhttp.Request); ok && req.URL != nil {
					u := *req.URL
					u.Path, u.RawPath, u.RawQuery, u.Fragment = "", "", "", ""
					sent.url = RedactURL(u.String())
				}
			}
			return next.HandleFinalize(ctx, in)
		})
		if err := stack.Finalize.Add(record, middleware.After); err != nil {
			return err
		}
		// Innermost in the deserialize step: next returns once the response's
		// head arrived.
		answered := middleware.DeserializeMiddlewareFunc("benthos-kinesis/RecordAnswer", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if sent, ok := ctx.Value(sentToKey{}).(*sentTo); ok {
				// A failed round trip carries a response of status 0.
				if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Response != nil && resp.StatusCode != 0 {
					sent.answered = true
				}
			}
			return out, md, err
		})
		return stack.Deserialize.Add(answered, middleware.After)
	}
}
