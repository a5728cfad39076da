package kpl

import (
	"errors"
	"fmt"
)

// CorruptError reports an aggregated record (or a user record's explicit hash
// key) that cannot be decoded. Unpack returns no user records together with
// it: a corrupt aggregate is rejected whole, never delivered in part.
//
// Reason is a short, stable, human-readable description meant for logs and
// message metadata, e.g. "md5 mismatch", "truncated protobuf" or
// "record 4: partition key index 7 out of range (table has 3)".
type CorruptError struct {
	Reason string
}

func (e *CorruptError) Error() string {
	return "kpl: corrupt aggregated record: " + e.Reason
}

// IsCorrupt reports whether err is or wraps a *CorruptError.
func IsCorrupt(err error) bool {
	var ce *CorruptError
	return errors.As(err, &ce)
}

func corrupt(reason string) *CorruptError { return &CorruptError{Reason: reason} }

func corruptf(format string, args ...any) *CorruptError {
	return &CorruptError{Reason: fmt.Sprintf(format, args...)}
}

// ErrInvalidHashKey is wrapped by the errors of ParseHashKey,
// ParseHashKeyRange and the packing functions when a hash key is not a decimal
// integer in [0, 2^128).
var ErrInvalidHashKey = errors.New("kpl: invalid hash key")

// ErrTooLarge is wrapped by the errors of Builder.Add and Pack when the
// aggregate would exceed its size limit. The record that did not fit has not been added.
var ErrTooLarge = errors.New("kpl: aggregated record would exceed the size limit")

// ErrNoRecords is returned when packing an aggregate of no user records: it
// would have no partition key for its carrier Kinesis record.
var ErrNoRecords = errors.New("kpl: no user records to aggregate")
