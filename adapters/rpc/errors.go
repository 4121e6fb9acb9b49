package rpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
)

// codeRow pairs a domain error code with the Connect code it travels as.
type codeRow struct {
	domain  string
	connect connect.Code
}

// codeTable is the one table between domain codes and Connect codes, and
// both directions scan it in order (wtf's error.go keeps one table the same
// way, so the two directions cannot drift apart):
//
//   - a server sends the Connect code of the first row whose domain code
//     matches (toConnectError);
//   - a client reads back the domain code of the first row whose Connect
//     code matches (fromConnectError).
//
// Where several domain codes share a Connect code, the row listed first is
// what a client reads back; the rows after it are the documented
// equivalents. A row shadowed in one direction says so.
var codeTable = []codeRow{
	{domain.CodeInvalidArgument, connect.CodeInvalidArgument},
	// Read back as INVALID_ARGUMENT. Monitor sends it in a StreamError
	// frame, where it keeps its own name.
	{domain.CodeInvalidFirstFrame, connect.CodeInvalidArgument},
	{domain.CodeNotFound, connect.CodeNotFound},
	{domain.CodeFailedPrecondition, connect.CodeFailedPrecondition},
	{domain.CodeResourceExhausted, connect.CodeResourceExhausted},
	{domain.CodeUnavailable, connect.CodeUnavailable},
	// Read back as UNAVAILABLE: to a client a reporter that is shutting
	// down is one it cannot reach for now.
	{domain.CodeShuttingDown, connect.CodeUnavailable},
	// Client direction only (the UNAVAILABLE row above wins for a server):
	// a deadline or cancellation a server enforced on the caller's behalf
	// (Connect-Timeout-Ms, grpc-timeout) is the caller's request ending
	// unanswered, never a lease.
	{domain.CodeUnavailable, connect.CodeDeadlineExceeded},
	{domain.CodeUnavailable, connect.CodeCanceled},
	// Server direction only (the row above wins for a client). No RPC of
	// ours ends with a lease as its status: Monitor sends LEASE_EXPIRED in
	// a StreamError frame and Watch sessions hold no lease.
	{domain.CodeLeaseExpired, connect.CodeDeadlineExceeded},
	{domain.CodeReplaced, connect.CodeAborted},
	{domain.CodeUnauthenticated, connect.CodeUnauthenticated},
	{domain.CodePermissionDenied, connect.CodePermissionDenied},
}

// connectCode returns the Connect code a server sends for a domain code.
func connectCode(code string) (connect.Code, bool) {
	for _, r := range codeTable {
		if r.domain == code {
			return r.connect, true
		}
	}
	return 0, false
}

// domainCode returns the domain code a client reads for a Connect code.
func domainCode(code connect.Code) (string, bool) {
	for _, r := range codeTable {
		if r.connect == code {
			return r.domain, true
		}
	}
	return "", false
}

// toConnectError maps err through codeTable; anything unknown (INTERNAL
// included) becomes Internal with a generic message (details stay in the
// logs).
func toConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if code, ok := connectCode(domain.ErrorCode(err)); ok {
		return connect.NewError(code, errors.New(domain.ErrorMessage(err)))
	}
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}

// fromConnectError turns the error of a call made with ctx back into the
// domain error model. A call that ended on the client's side (ctx ended, or
// the client gave up or timed out before the server answered) is
// UNAVAILABLE and keeps err as its cause, so errors.Is still sees
// context.DeadlineExceeded or context.Canceled. A code codeTable does not
// list is INTERNAL, naming the code.
func fromConnectError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return domain.Errorf(domain.CodeUnavailable, "%v", err)
	}
	if ctx.Err() != nil || (!connect.IsWireError(err) && isContextCode(ce.Code())) {
		return domain.Wrap(err, domain.CodeUnavailable, "the request ended before the reporter answered: %s", ce.Message())
	}
	if code, ok := domainCode(ce.Code()); ok {
		return domain.Errorf(code, "%s", ce.Message())
	}
	return domain.Errorf(domain.CodeInternal, "%s: %s", ce.Code(), ce.Message())
}

func isContextCode(c connect.Code) bool {
	return c == connect.CodeDeadlineExceeded || c == connect.CodeCanceled
}
