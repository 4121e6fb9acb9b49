package app

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"connectrpc.com/authn"
	"connectrpc.com/connect"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// requireToken demands "Authorization: Bearer <token>" on everything but
// the liveness and readiness probes (orchestrators probe without
// credentials). authn answers in the caller's protocol: gRPC and gRPC-Web
// clients get status Unauthenticated, Connect clients and browsers a 401
// with a JSON error; the WWW-Authenticate challenge travels as the error's
// metadata, so browsers and Connect clients see it as a header. gRPC
// carries an error's metadata in trailers, where net/http refuses that
// name (a warning per call), so gRPC callers get the status alone.
//
// With an admin token, AdminService calls may carry it instead: the
// service itself then tells a router's token from the admin's.
func requireToken(token, adminToken string, next http.Handler, opts ...connect.HandlerOption) http.Handler {
	want, wantAdmin := []byte(token), []byte(adminToken)
	check := func(_ context.Context, r *http.Request) (any, error) {
		if isProbe(r) {
			return nil, nil
		}
		got, ok := authn.BearerToken(r)
		if ok && subtle.ConstantTimeCompare([]byte(got), want) == 1 {
			return nil, nil
		}
		if ok && adminToken != "" && strings.HasPrefix(r.URL.Path, "/"+loadreporterv1connect.AdminServiceName+"/") &&
			subtle.ConstantTimeCompare([]byte(got), wantAdmin) == 1 {
			return nil, nil
		}
		err := authn.Errorf("missing or wrong bearer token")
		if !isGRPC(r) {
			err.Meta().Set("WWW-Authenticate", `Bearer realm="loadreporter"`)
		}
		return nil, err
	}
	return authn.NewMiddleware(check, opts...).Wrap(next)
}

// isGRPC reports whether r speaks gRPC proper (not gRPC-Web).
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/grpc-web")
}

// isProbe reports whether r is a liveness or readiness probe: served to
// anyone, by any name, as orchestrators and load balancers probe.
func isProbe(r *http.Request) bool {
	return r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
}
