package kinesisfake

import (
	"errors"
	"fmt"
	"net/http"
)

// AWS error codes the fake answers with. They are the error shape names of the
// Kinesis API, which the SDK maps to the types in kinesis/types.
const (
	CodeExpiredIterator       = "ExpiredIteratorException"
	CodeExpiredNextToken      = "ExpiredNextTokenException"
	CodeInternalFailure       = "InternalFailureException"
	CodeInvalidArgument       = "InvalidArgumentException"
	CodeLimitExceeded         = "LimitExceededException"
	CodeProvisionedThroughput = "ProvisionedThroughputExceededException"
	CodeResourceInUse         = "ResourceInUseException"
	CodeResourceNotFound      = "ResourceNotFoundException"
	CodeValidation            = "ValidationException"
	CodeAccessDenied          = "AccessDeniedException"
	CodeServiceUnavailable    = "ServiceUnavailable"
	codeSerialization         = "SerializationException"
	codeUnknownOperation      = "UnknownOperationException"
)

// ErrClosed is returned by the helpers once the server is closed.
var ErrClosed = errors.New("kinesisfake: server closed")

// apiError is an error the fake answers with, as AWS would.
type apiError struct {
	code string
	msg  string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errf(code, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// statusFor returns the HTTP status AWS uses for an error code.
func statusFor(code string) int {
	switch code {
	case CodeInternalFailure, "InternalFailure", "InternalServerError":
		return http.StatusInternalServerError
	case CodeServiceUnavailable, "ServiceUnavailableException":
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// throttleCodes are the codes that count as a throttled call.
func isThrottle(code string) bool {
	return code == CodeLimitExceeded || code == CodeProvisionedThroughput
}

func notFoundStream(s *Server, name string) *apiError {
	return errf(CodeResourceNotFound, "Stream %s under account %s not found.", name, s.cfg.acct)
}

// listLimit validates the Limit of DescribeStream and ListStreams: 1 to
// 10,000, 100 when absent.
func listLimit(limit *int) (int, error) {
	if limit == nil {
		return 100, nil
	}
	if *limit < 1 || *limit > 10000 {
		return 0, errf(CodeValidation, "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10000", *limit)
	}
	return *limit, nil
}
