package app

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/authn"
	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/loadreporter/loadreporter/adapters/orca"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/hostcheck"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// Access is who may call what on the port: without --auth-token, any
// caller that names this host (the Host check against DNS rebinding);
// with it, the bearer token on what --auth-scope guards.
type Access struct {
	c      SecurityConfig
	listen string
}

// NewAccess checks the security settings that decide access: the scope,
// and no shipped placeholder as a token.
func NewAccess(c SecurityConfig, s ServerConfig) (*Access, error) {
	if c.AuthScope != AuthScopeAll && c.AuthScope != AuthScopeOperators {
		return nil, fmt.Errorf("--auth-scope %q: want %s or %s", c.AuthScope, AuthScopeAll, AuthScopeOperators)
	}
	for _, tok := range []struct{ flag, v string }{{"auth-token", c.AuthToken}, {"admin-token", c.AdminToken}} {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(tok.v)), "change-me") {
			return nil, fmt.Errorf("--%s is still the shipped placeholder %q: set a long random token (openssl rand -hex 32)",
				tok.flag, domain.Shorten(tok.v, 40))
		}
		if n := len(tok.v); n > 0 && n < minTokenLength {
			c.warnings = append(c.warnings, fmt.Sprintf("--%s is %d characters: a token this short can be guessed; use a long random one (openssl rand -hex 32)", tok.flag, n))
		}
	}
	if c.AdminToken != "" && c.AdminToken == c.AuthToken {
		c.warnings = append(c.warnings, "--admin-token equals --auth-token: every holder of the routers' token may change the topology; give AdminService a token of its own")
	}
	return &Access{c: c, listen: s.Listen}, nil
}

// minTokenLength is the shortest token said nothing about at start.
const minTokenLength = 16

// guard puts the access check in front of h; opts are the port's
// handler options, for the refusals authn writes.
func (a *Access) guard(h http.Handler, opts ...connect.HandlerOption) http.Handler {
	if a.c.AuthToken != "" {
		return requireToken(a.c.AuthToken, a.c.AdminToken, a.c.AuthScope, h, opts...)
	}
	guarded := hostcheck.Guard(a.listen, strings.Split(a.c.AllowedHosts, ","), "add it with --allowed-host, or set --auth-token", h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedToAnyName(r) {
			h.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// warnings are what to say at start about these settings.
func (a *Access) warnings() []string { return a.c.warnings }

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
//
// A browser cannot send a bearer token, so what the dashboard reads (any
// GET or HEAD, and the live page's Watch stream) also takes the token as
// the password of HTTP Basic authentication, any user name: a page
// refused for want of it challenges for Basic too, the browser asks for
// it once, and then sends it with every request of the page's origin,
// its script's Watch included. Nothing that changes state takes Basic:
// a browser also attaches it to requests other sites make it send.
//
// With scope AuthScopeOperators the token guards only what operators use
// (pages, Watch, history, AdminService); what routers and scrapers use is
// served without it (routerSurface).
func requireToken(token, adminToken, scope string, next http.Handler, opts ...connect.HandlerOption) http.Handler {
	want, wantAdmin := []byte(token), []byte(adminToken)
	check := func(_ context.Context, r *http.Request) (any, error) {
		if isProbe(r) || scope == AuthScopeOperators && routerSurface(r) {
			return nil, nil
		}
		got, ok := authn.BearerToken(r)
		if !ok && readsOnly(r) {
			_, got, ok = r.BasicAuth()
		}
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
			if readsOnly(r) {
				// Browsers skip the Bearer challenge and answer this one.
				err.Meta().Add("WWW-Authenticate", `Basic realm="loadreporter", charset="UTF-8"`)
			}
		}
		return nil, err
	}
	return authn.NewMiddleware(check, opts...).Wrap(next)
}

// readsOnly reports whether r is one of the dashboard's reads, which may
// carry the token as a Basic password: a GET or HEAD, or the live page's
// Watch stream.
// AdminService never is, whatever the method.
func readsOnly(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/"+loadreporterv1connect.AdminServiceName+"/") {
		return false
	}
	return r.Method == http.MethodGet || r.Method == http.MethodHead ||
		strings.HasPrefix(r.URL.Path, "/"+loadreporterv1connect.WatchServiceName+"/")
}

// isGRPC reports whether r speaks gRPC proper (not gRPC-Web).
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/grpc-web")
}

// servedToAnyName reports whether r is served whatever host it names. The
// Host check stops DNS rebinding, a foreign page making a browser talk to
// this port through a name that resolves here; it guards what a browser
// can reach and use. Exempt are the probes (load balancers probe by the
// name they were given), the pollers' reads and the scrape of /metrics
// (routers and scrapers dial workers by DNS names), and native gRPC over
// HTTP/2 (grpc-go sends the channel's target, a DNS name, as :authority):
// a browser speaks only HTTP/1.1 in cleartext and cannot make a call with
// trailers, and over TLS a rebound name fails the certificate.
func servedToAnyName(r *http.Request) bool {
	return isProbe(r) || isPollOrScrape(r) || r.ProtoMajor == 2 && isGRPC(r)
}

// isPollOrScrape reports whether r is a poller's read of the load or a
// scrape of /metrics.
func isPollOrScrape(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/v1/loads", "/get_load", "/metrics":
		return true
	}
	return false
}

// Auth scopes: what --auth-token guards.
const (
	AuthScopeAll       = "all"
	AuthScopeOperators = "operators"
)

// routerSurface reports whether r is what routers and scrapers use: the
// Monitor and ORCA streams and gRPC health checks in any protocol, polls
// and scrapes. None of it changes state; the routers that exist send no
// credentials.
func routerSurface(r *http.Request) bool {
	if isPollOrScrape(r) {
		return true
	}
	for _, prefix := range routerRoutes {
		if strings.HasPrefix(r.URL.Path, prefix) {
			return true
		}
	}
	return false
}

var routerRoutes = []string{monitorRoute, "/" + orca.ServiceName + "/", "/" + grpchealth.HealthV1ServiceName + "/", pollapi.GetLoadsProcedure}

// isProbe reports whether r is a liveness or readiness probe: served to
// anyone, by any name, as orchestrators and load balancers probe.
func isProbe(r *http.Request) bool {
	return r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
}
