package awsclient

import (
	"context"

	"github.com/aws/smithy-go/middleware"
)

// OnError has a client tell f of every call that fails, once per call
// (after the SDK's own retries), with the service ("Kinesis", "DynamoDB")
// and the operation: what the input counts by class for its dashboard.
// SubscribeToShard's events fail after the call returned; the fan-out
// reader counts those itself.
func OnError(f func(service, operation string, err error)) Option {
	return func(o *clientOptions) { o.onError = f }
}

// reportErrors is the outermost step of a call: it sees what the caller
// gets, the deadline's NoAnswerError included.
func reportErrors(f func(service, operation string, err error)) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benthos-kinesis/ReportErrors", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				f(middleware.GetServiceID(ctx), middleware.GetOperationName(ctx), err)
			}
			return out, md, err
		}), middleware.Before)
	}
}
