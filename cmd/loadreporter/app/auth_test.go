package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// TestRequireTokenAnswersInTheCallersProtocol: browsers get a 401 with a
// challenge, gRPC and gRPC-Web callers status 16 (Unauthenticated), the
// probes need no token, and the right token passes.
func TestRequireTokenAnswersInTheCallersProtocol(t *testing.T) {
	h := requireToken("s3cret", "", AuthScopeAll, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	serve := func(method, path, ctype, auth string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	w := serve("GET", "/metrics", "", "")
	var body struct{ Code, Message string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusUnauthorized ||
		w.Header().Get("WWW-Authenticate") != `Bearer realm="loadreporter"` || body.Code != "unauthenticated" {
		t.Errorf("browser without token: %d %v %q (%v)", w.Code, w.Header(), w.Body, err)
	}
	if w := serve("GET", "/", "", "Bearer wrong"); w.Code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", w.Code)
	}
	for _, ctype := range []string{"application/grpc", "application/grpc-web+proto"} {
		w := serve("POST", "/sglang.router.loadmonitor.v1.LoadMonitorService/Monitor", ctype, "")
		// gRPC sends the status as a trailer, gRPC-Web in the headers.
		if st := w.Result().Trailer.Get("Grpc-Status") + w.Result().Header.Get("Grpc-Status"); st != "16" {
			t.Errorf("%s without token: HTTP %d, grpc-status %q", ctype, w.Code, st)
		}
		// Declared as a trailer, net/http would refuse the challenge and
		// log a warning for each such call.
		if declared := w.Header().Values("Trailer"); ctype == "application/grpc" &&
			strings.Contains(strings.ToLower(strings.Join(declared, ",")), "www-authenticate") {
			t.Errorf("%s: the challenge is declared as a trailer: %q", ctype, declared)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if w := serve("GET", path, "", ""); w.Code != http.StatusTeapot {
			t.Errorf("%s without token: %d, want it served", path, w.Code)
		}
	}
	if w := serve("GET", "/metrics", "", "Bearer s3cret"); w.Code != http.StatusTeapot {
		t.Errorf("with the token: %d, want it served", w.Code)
	}
}

// TestBrowsersMaySendTheTokenAsABasicPassword: a browser, which cannot
// send a bearer token, is challenged for Basic on what the dashboard
// reads and may send the token as its password (any user name); nothing
// that can change state takes Basic, so a request another site makes the
// browser send carries no authority.
func TestBrowsersMaySendTheTokenAsABasicPassword(t *testing.T) {
	h := requireToken("s3cret", "adm1n", AuthScopeAll, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	serve := func(method, path, ctype, user, password string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		if user != "" || password != "" {
			r.SetBasicAuth(user, password)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := serve("GET", "/", "", "", "")
	if got := w.Header().Values("WWW-Authenticate"); w.Code != http.StatusUnauthorized || !slices.Contains(got, `Basic realm="loadreporter", charset="UTF-8"`) {
		t.Errorf("page without a token: %d, challenges %q; want 401 with a Basic challenge", w.Code, got)
	}
	watch := "/" + loadreporterv1connect.WatchServiceName + "/Watch"
	for _, tc := range []struct{ method, path, ctype string }{
		{"GET", "/", ""},
		{"HEAD", "/history?since=1h", ""},
		{"GET", "/metrics", ""},
		{"POST", watch, "application/connect+proto"},
	} {
		if w := serve(tc.method, tc.path, tc.ctype, "anyone", "s3cret"); w.Code != http.StatusTeapot {
			t.Errorf("%s %s with the token as Basic password: %d, want it served", tc.method, tc.path, w.Code)
		}
		if w := serve(tc.method, tc.path, tc.ctype, "anyone", "wrong"); w.Code == http.StatusTeapot {
			t.Errorf("%s %s with a wrong Basic password: served", tc.method, tc.path)
		}
	}
	admin := "/" + loadreporterv1connect.AdminServiceName + "/SetSimMode"
	for _, tc := range []struct{ method, path, ctype, password string }{
		{"POST", "/sglang.router.loadmonitor.v1.LoadMonitorService/Monitor", "application/connect+proto", "s3cret"},
		{"POST", admin, "application/json", "s3cret"},
		{"GET", admin, "", "s3cret"},
		{"POST", admin, "application/json", "adm1n"},
	} {
		w := serve(tc.method, tc.path, tc.ctype, "anyone", tc.password)
		if w.Code == http.StatusTeapot {
			t.Errorf("%s %s with a Basic password: served", tc.method, tc.path)
		}
		if got := w.Header().Values("WWW-Authenticate"); slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "Basic") }) {
			t.Errorf("%s %s challenges for Basic: %q", tc.method, tc.path, got)
		}
	}
}

// TestOperatorsScopeLeavesRoutersOpen: with --auth-scope operators the
// token guards the pages, Watch, history and AdminService, while what
// routers and scrapers use is served without credentials, in every
// protocol.
func TestOperatorsScopeLeavesRoutersOpen(t *testing.T) {
	h := requireToken("s3cret", "", AuthScopeOperators, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	serve := func(method, path, ctype string) int {
		r := httptest.NewRequest(method, path, nil)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if st := w.Result().Trailer.Get("Grpc-Status") + w.Result().Header.Get("Grpc-Status"); st == "16" {
			return http.StatusUnauthorized
		}
		return w.Code
	}
	for _, tc := range []struct {
		method, path, ctype string
		open                bool
	}{
		{"POST", "/sglang.router.loadmonitor.v1.LoadMonitorService/Monitor", "application/grpc", true},
		{"POST", "/sglang.router.loadmonitor.v1.LoadMonitorService/Monitor", "application/connect+proto", true},
		{"POST", "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics", "application/grpc", true},
		{"POST", "/grpc.health.v1.Health/Check", "application/grpc", true},
		{"GET", "/v1/loads", "", true},
		{"GET", "/get_load", "", true},
		{"POST", "/sglang.grpc.scheduler.SglangScheduler/GetLoads", "application/grpc", true},
		{"POST", "/sglang.grpc.scheduler.SglangScheduler/Generate", "application/grpc", false},
		{"GET", "/metrics", "", true},
		{"GET", "/healthz", "", true},
		{"GET", "/", "", false},
		{"GET", "/history", "", false},
		{"POST", "/v1/loads", "", false},
		{"POST", "/" + loadreporterv1connect.WatchServiceName + "/Watch", "application/grpc", false},
		{"POST", "/" + loadreporterv1connect.AdminServiceName + "/SetTopology", "application/grpc", false},
		{"POST", "/" + loadreporterv1connect.HistoryServiceName + "/ListOutages", "application/json", false},
		{"POST", "/sglang.router.loadmonitor.v1.LoadMonitorServiceX/Monitor", "application/grpc", false},
	} {
		want := http.StatusUnauthorized
		if tc.open {
			want = http.StatusTeapot
		}
		if got := serve(tc.method, tc.path, tc.ctype); got != want {
			t.Errorf("%s %s (%s): %d, want %d", tc.method, tc.path, tc.ctype, got, want)
		}
	}
}
