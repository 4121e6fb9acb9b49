package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequireTokenAnswersInTheCallersProtocol: browsers get a 401 with a
// challenge, gRPC and gRPC-Web callers status 16 (Unauthenticated), the
// probes need no token, and the right token passes.
func TestRequireTokenAnswersInTheCallersProtocol(t *testing.T) {
	h := requireToken("s3cret", "", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
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
