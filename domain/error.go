package domain

import (
	"errors"
	"fmt"
)

// Error codes. The stream codes double as StreamError.code on the Monitor wire.
const (
	CodeInvalidFirstFrame = "INVALID_FIRST_FRAME"
	CodeInvalidArgument   = "INVALID_ARGUMENT"
	CodeLeaseExpired      = "LEASE_EXPIRED"
	CodeReplaced          = "REPLACED"
	CodeResourceExhausted = "RESOURCE_EXHAUSTED"
	CodeShuttingDown      = "SHUTTING_DOWN"
	CodeNotFound          = "NOT_FOUND"
	CodeUnavailable       = "UNAVAILABLE"
	CodeInternal          = "INTERNAL"
)

// Error is the one error type the core returns to callers that must act on a
// code (transports map codes to their own status; logs print the message).
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it wraps an *Error, CodeInternal for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the human message of err: the Message of an *Error, a
// generic text for anything else (internal details stay in logs).
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// CodeFailedPrecondition: the request is valid but the service is not in a
// state to honour it (e.g. a simulator command without the simulator).
const CodeFailedPrecondition = "FAILED_PRECONDITION"
