// Package awserr sorts the errors of Kinesis calls into the classes the record
// publishers act on: retry quietly, back off, count towards a limit, or stop.
package awserr

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Class is what a caller should do about an error.
type Class uint8

const (
	// Retryable errors are retried with backoff, counted towards a limit,
	// and surfaced when the limit is reached: unknown service errors and
	// client-side failures that may or may not heal.
	Retryable Class = iota
	// Recoverable errors are transient by nature (connection resets, time-outs,
	// 5xx, InternalFailure): retry with backoff without counting.
	Recoverable
	// Throttled errors mean a quota was hit: back off with jitter and retry
	// without counting; report them as throttles.
	Throttled
	// Fatal errors will not heal by retrying the same call (access denied,
	// invalid arguments, KMS key problems, unknown credentials): stop and say so.
	Fatal
	// Canceled means the caller's context ended.
	Canceled
)

func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case Recoverable:
		return "recoverable"
	case Throttled:
		return "throttled"
	case Fatal:
		return "fatal"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// Code returns the AWS error code of err ("ResourceNotFoundException"), or ""
// when err carries none.
func Code(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// Is reports whether err carries the AWS error code.
func Is(err error, code string) bool { return err != nil && Code(err) == code }

// Classify sorts err, with the SDK's own lists of throttling and retryable
// codes and of connection errors, and this package's of the rest. Codes that
// need a caller's judgement (ExpiredIterator,
// ResourceInUse, ResourceNotFound) are classified here by their general nature;
// callers check for them with Is before calling Classify.
func Classify(err error) Class {
	if err == nil {
		return Recoverable
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	code := Code(err)
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok || code == "KMSThrottlingException" {
		return Throttled
	}
	if _, ok := retry.DefaultRetryableErrorCodes[code]; ok {
		return Recoverable
	}
	switch code {
	case "InternalFailureException", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException",
		"InternalServerError", "InternalError", "ResourceInUseException":
		return Recoverable
	case "AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidClientTokenId",
		"IncompleteSignature", "InvalidSignatureException", "SignatureDoesNotMatch", "ExpiredTokenException",
		"ExpiredToken", "MissingAuthenticationToken", "InvalidArgumentException", "ValidationException",
		"KMSAccessDeniedException", "KMSDisabledException", "KMSInvalidStateException", "KMSNotFoundException",
		"KMSOptInRequired", "KMSInvalidKeyUsageException", "ResourceNotFoundException", "OptInRequired",
		"NotAuthorized", "InvalidAction":
		return Fatal
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if apiErr.ErrorFault() == smithy.FaultServer {
			return Recoverable
		}
		return Retryable
	}
	if errors.Is(err, context.DeadlineExceeded) || isNetwork(err) ||
		(retry.RetryableConnectionError{}).IsErrorRetryable(err).Bool() {
		return Recoverable
	}
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) {
		return Classify(errors.Unwrap(maxAttempts))
	}
	return Retryable
}

func isNetwork(err error) bool {
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	// HTTP/2 stream resets and GOAWAYs come as errors of unexported net/http
	// types; their text is all there is to go by.
	msg := err.Error()
	for _, s := range []string{"stream error: stream ID", "http2: ", "GOAWAY", "connection reset by peer", "use of closed network connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
