package rpc

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
)

// maxLoggedArgs bounds the arguments a log line repeats.
const maxLoggedArgs = 256

// guard is AdminService's interceptor: it checks the admin token, if one is
// configured, and logs every call.
func (a *Admin) guard(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		err := a.authorize(req.Header())
		var resp connect.AnyResponse
		if err == nil {
			resp, err = next(ctx, req)
		}
		a.logCall(ctx, req, err)
		return resp, err
	}
}

// authorize demands "Authorization: Bearer <Token>" when Token is set.
func (a *Admin) authorize(h http.Header) error {
	if a.opts.Token == "" {
		return nil
	}
	got := h.Get("Authorization")
	if got == "" {
		return connectcode.ToConnect(domain.Errorf(domain.CodeUnauthenticated,
			"AdminService needs the admin bearer token"))
	}
	// The scheme is case-insensitive (RFC 9110 §11.1), as the reporter's
	// own token check reads it.
	scheme, token, _ := strings.Cut(got, " ")
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(a.opts.Token)) != 1 {
		return connectcode.ToConnect(domain.Errorf(domain.CodePermissionDenied,
			"AdminService needs the admin bearer token; this one may not change the reporter"))
	}
	return nil
}

// logCall writes who called what, and how it ended; slog stamps when.
// Refused calls are rate-limited: anyone who reaches the port can make
// them.
func (a *Admin) logCall(ctx context.Context, req connect.AnyRequest, err error) {
	outcome := "ok"
	if err != nil {
		outcome = connect.CodeOf(err).String()
	}
	attrs := []any{"method", req.Spec().Procedure, "peer", req.Peer().Addr, "outcome", outcome}
	if subject := transportFrom(ctx).clientSubject(); subject != "" {
		attrs = append(attrs, "client_cert", subject)
	}
	if refused(err) {
		ok, suppressed := a.deniedLog.Allow(time.Now())
		if !ok {
			return
		}
		a.opts.Logger.Warn("admin call refused", append(attrs, "suppressed", suppressed)...)
		return
	}
	attrs = append(attrs, "args", loggedArgs(req.Any()))
	if err != nil {
		// An error may repeat the arguments (an unknown mode is quoted).
		attrs = append(attrs, "err", domain.Shorten(connectMessage(err), maxLoggedArgs))
	}
	a.opts.Logger.Info("admin call", attrs...)
}

func refused(err error) bool {
	c := connect.CodeOf(err)
	return err != nil && (c == connect.CodeUnauthenticated || c == connect.CodePermissionDenied)
}

// loggedArgs renders a request's arguments on one short line.
func loggedArgs(m any) string {
	msg, ok := m.(proto.Message)
	if !ok {
		return ""
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		return ""
	}
	return domain.Shorten(string(b), maxLoggedArgs)
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}
