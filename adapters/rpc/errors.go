package rpc

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
)

// connectCodes is the one table from domain error codes to Connect codes.
var connectCodes = map[string]connect.Code{
	domain.CodeInvalidArgument:    connect.CodeInvalidArgument,
	domain.CodeInvalidFirstFrame:  connect.CodeInvalidArgument,
	domain.CodeResourceExhausted:  connect.CodeResourceExhausted,
	domain.CodeShuttingDown:       connect.CodeUnavailable,
	domain.CodeUnavailable:        connect.CodeUnavailable,
	domain.CodeNotFound:           connect.CodeNotFound,
	domain.CodeLeaseExpired:       connect.CodeDeadlineExceeded,
	domain.CodeReplaced:           connect.CodeAborted,
	domain.CodeFailedPrecondition: connect.CodeFailedPrecondition,
}

// domainCodes maps a remote Connect code back for clients of our services.
var domainCodes = map[connect.Code]string{
	connect.CodeInvalidArgument:    domain.CodeInvalidArgument,
	connect.CodeResourceExhausted:  domain.CodeResourceExhausted,
	connect.CodeUnavailable:        domain.CodeUnavailable,
	connect.CodeNotFound:           domain.CodeNotFound,
	connect.CodeDeadlineExceeded:   domain.CodeLeaseExpired,
	connect.CodeAborted:            domain.CodeReplaced,
	connect.CodeFailedPrecondition: domain.CodeFailedPrecondition,
}

// toConnectError maps err through connectCodes; anything unknown becomes
// Internal with a generic message (details stay in the logs).
func toConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if code, ok := connectCodes[domain.ErrorCode(err)]; ok {
		return connect.NewError(code, errors.New(domain.ErrorMessage(err)))
	}
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}
