package domain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Error codes: every code an *Error carries, declared here and nowhere
// else. Transports map them to their own status through one table each
// (adapters/internal/connectcode for Connect, gRPC and gRPC-Web); the
// Monitor stream sends them by name in its StreamError frames.
const (
	// CodeInvalidArgument: a value outside what is allowed; the message
	// names the field or flag and what was allowed.
	CodeInvalidArgument = "INVALID_ARGUMENT"
	// CodeInvalidFirstFrame: a Monitor stream whose first frame is not a
	// valid register.
	CodeInvalidFirstFrame = "INVALID_FIRST_FRAME"
	// CodeLeaseExpired: a router session whose lease ran out.
	CodeLeaseExpired = "LEASE_EXPIRED"
	// CodeReplaced: a router session replaced by a register with the same
	// router_id on another stream.
	CodeReplaced = "REPLACED"
	// CodeResourceExhausted: a limit is reached (sessions, pending streams,
	// a frame budget).
	CodeResourceExhausted = "RESOURCE_EXHAUSTED"
	// CodeShuttingDown: the reporter is shutting down.
	CodeShuttingDown = "SHUTTING_DOWN"
	// CodeNotFound: what was asked for does not exist (any more).
	CodeNotFound = "NOT_FOUND"
	// CodeFailedPrecondition: the request is valid but the service is not
	// in a state to honour it (e.g. a simulator command without the
	// simulator, a history query with history off).
	CodeFailedPrecondition = "FAILED_PRECONDITION"
	// CodeUnavailable: a dependency cannot be reached for now; worth a
	// retry.
	CodeUnavailable = "UNAVAILABLE"
	// CodeUnauthenticated: a missing or wrong bearer token.
	CodeUnauthenticated = "UNAUTHENTICATED"
	// CodePermissionDenied: a valid token that may not do this (a router's
	// token calling AdminService).
	CodePermissionDenied = "PERMISSION_DENIED"
	// CodeInternal: anything else; its message never reaches a peer.
	CodeInternal = "INTERNAL"

	// Codes of snapshot problems; they end up as an UNREACHABLE report's
	// last_error, never on a transport.

	// CodeInvalidSnapshot: a pulled snapshot that breaks its invariants.
	CodeInvalidSnapshot = "INVALID_SNAPSHOT"
	// CodeRankSetChanged: a snapshot whose ranks are not the expected set.
	CodeRankSetChanged = "RANK_SET_CHANGED"
	// CodePullTimeout: a pull whose context ended first.
	CodePullTimeout = "PULL_TIMEOUT"
	// CodeSourceFailed: the engine could not be read (refused, an error
	// status, a closed source).
	CodeSourceFailed = "SOURCE_FAILED"
)

// Error is the one error type of the project: a code callers act on
// (transports map it to their own status), a message safe to show, and,
// optionally, the cause it came from (a driver's or a context's error),
// which errors.Is and errors.As see and logs print, but which never reaches
// a peer.
type Error struct {
	Code    string
	Message string
	// Field, when set, names the option at fault, as Message starts: the
	// INVALID_ARGUMENT of a constructor's option (InvalidOption). A
	// composition root maps it to the flag or setting that set it.
	Field string
	Cause error
}

func (e *Error) Error() string {
	if e.Cause == nil {
		return e.Code + ": " + e.Message
	}
	return e.Code + ": " + e.Message + ": " + e.Cause.Error()
}

// Unwrap returns the cause, so that errors.Is(err, context.DeadlineExceeded)
// holds for an error built from a context's.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidOption is the INVALID_ARGUMENT of a constructor's option: its
// Message is option, a space, and what is wrong with it, formatted
// ("pull-budget -1s: must not be negative"), and its Field is option.
// Packages name their options in kebab case, as their documentation does;
// the names are the packages' own and may differ from any flag.
func InvalidOption(option, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: option, Message: option + " " + fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error with a formatted message that keeps cause.
func Wrap(cause error, code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Cause: cause}
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

// FieldOf returns the option an *Error in err names (its Field), or "".
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
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

// PullEnded is the error of a pull whose context ended (ctxErr) after
// elapsed: one line for last_error, "<what>: timed out after <elapsed>" or
// "<what>: pull canceled", coded PULL_TIMEOUT and still matching ctxErr
// under errors.Is, so the fire loop counts it as a timeout.
func PullEnded(what string, ctxErr error, elapsed time.Duration) *Error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return Wrap(ctxErr, CodePullTimeout, "%s: timed out after %s", what, elapsed.Round(time.Millisecond))
	}
	return Wrap(ctxErr, CodePullTimeout, "%s: pull canceled", what)
}
