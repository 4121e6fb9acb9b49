package connectcode

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
)

// Row pairs a domain error code with the Connect code it travels as.
type Row struct {
	Domain  string
	Connect connect.Code
}

// table is scanned in order in both directions (wtf's error.go keeps one
// table the same way):
//
//   - a server sends the Connect code of the first row whose domain code
//     matches (ToConnect);
//   - a client reads back the domain code of the first row whose Connect
//     code matches (FromConnect).
//
// Where several domain codes share a Connect code, the row listed first is
// what a client reads back; the rows after it are the documented
// equivalents. A row shadowed in one direction says so.
var table = []Row{
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
	// a StreamError frame and Watch and ORCA sessions hold no lease.
	{domain.CodeLeaseExpired, connect.CodeDeadlineExceeded},
	{domain.CodeReplaced, connect.CodeAborted},
	{domain.CodeUnauthenticated, connect.CodeUnauthenticated},
	{domain.CodePermissionDenied, connect.CodePermissionDenied},
}

// Rows returns a copy of the table, in order, for tests that cover every
// row.
func Rows() []Row { return append([]Row(nil), table...) }

// Code returns the Connect code a server sends for a domain code.
func Code(code string) (connect.Code, bool) {
	for _, r := range table {
		if r.Domain == code {
			return r.Connect, true
		}
	}
	return 0, false
}

// DomainCode returns the domain code a client reads for a Connect code.
func DomainCode(code connect.Code) (string, bool) {
	for _, r := range table {
		if r.Connect == code {
			return r.Domain, true
		}
	}
	return "", false
}

// errInternal is what a peer reads for any error the table does not
// list: its details stay in the logs.
var errInternal = errors.New("internal error")

// ToConnect maps err through the table for a server to send; a
// *connect.Error passes as it is, and anything unknown (INTERNAL included)
// becomes Internal with a generic message.
func ToConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if code, ok := Code(domain.ErrorCode(err)); ok {
		return connect.NewError(code, errors.New(domain.ErrorMessage(err)))
	}
	return connect.NewError(connect.CodeInternal, errInternal)
}

// FromConnect turns the error of a call made with ctx back into the
// domain error model. A call that ended on the client's side (ctx ended,
// or the client gave up or timed out before the server answered) is
// UNAVAILABLE and keeps err as its cause, so errors.Is still sees
// context.DeadlineExceeded or context.Canceled. A code the table does not
// list is INTERNAL, naming the code.
func FromConnect(ctx context.Context, err error) error {
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
	if code, ok := DomainCode(ce.Code()); ok {
		return domain.Errorf(code, "%s", ce.Message())
	}
	return domain.Errorf(domain.CodeInternal, "%s: %s", ce.Code(), ce.Message())
}

func isContextCode(c connect.Code) bool {
	return c == connect.CodeDeadlineExceeded || c == connect.CodeCanceled
}
