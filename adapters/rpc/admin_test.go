package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// fakeTopology holds an expected rank set.
type fakeTopology struct {
	mu  sync.Mutex
	set domain.RankSet
}

func (f *fakeTopology) ExpectedRanks() domain.RankSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set
}

func (f *fakeTopology) SetExpectedRanks(s domain.RankSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = s
}

func newAdminClient(t *testing.T, o AdminOptions) (loadreporterv1connect.AdminServiceClient, *fakeTopology) {
	t.Helper()
	topo := &fakeTopology{}
	a, err := NewAdminWithOptions(nil, topo, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, a.Handler)
	return loadreporterv1connect.NewAdminServiceClient(srv.Client(), srv.URL), topo
}

func setTopology(t *testing.T, c loadreporterv1connect.AdminServiceClient, n int32, authorization string) error {
	t.Helper()
	req := connect.NewRequest(&lrv1.SetTopologyRequest{DpSize: n})
	if authorization != "" {
		req.Header().Set("Authorization", authorization)
	}
	_, err := c.SetTopology(testContext(t), req)
	return err
}

// TestAdminToken: with an admin token, a call without a token is
// UNAUTHENTICATED and one with another token (a router's) is
// PERMISSION_DENIED; neither changes anything.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	c, topo := newAdminClient(t, AdminOptions{Token: "adm1n"})
	for _, tc := range []struct {
		authorization string
		want          connect.Code
	}{
		{"", connect.CodeUnauthenticated},
		{"Bearer router-token", connect.CodePermissionDenied},
		{"Bearer adm1n2", connect.CodePermissionDenied},
		{"adm1n", connect.CodePermissionDenied},
		{"Basic adm1n", connect.CodePermissionDenied},
	} {
		if err := setTopology(t, c, 4, tc.authorization); connect.CodeOf(err) != tc.want {
			t.Errorf("authorization %q: %v, want %v", tc.authorization, err, tc.want)
		}
	}
	if !topo.ExpectedRanks().Empty() {
		t.Fatal("a refused call changed the topology")
	}
	for _, auth := range []string{"Bearer adm1n", "bearer adm1n", "BEARER adm1n"} { // the scheme in any case
		if err := setTopology(t, c, 4, auth); err != nil {
			t.Fatalf("with the admin token as %q: %v", auth, err)
		}
	}
	if got := topo.ExpectedRanks(); !got.Equal(domain.RankRange(4)) {
		t.Errorf("expected ranks %v, want 0..3", got)
	}
	open, _ := newAdminClient(t, AdminOptions{})
	if err := setTopology(t, open, 4, "Bearer anything"); err != nil {
		t.Errorf("without an admin token configured: %v", err)
	}
}

// TestAdminMaxDPSize: SetTopology refuses a dp_size beyond MaxDPSize,
// naming the flag that raises it.
func TestAdminMaxDPSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max      int
		ok, over int32
	}{{0, DefaultMaxDPSize, DefaultMaxDPSize + 1}, {8, 8, 9}} {
		c, _ := newAdminClient(t, AdminOptions{MaxDPSize: tc.max})
		if err := setTopology(t, c, tc.ok, ""); err != nil {
			t.Errorf("max %d, dp_size %d: %v", tc.max, tc.ok, err)
		}
		err := setTopology(t, c, tc.over, "")
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "--max-dp-size") {
			t.Errorf("max %d, dp_size %d: %v, want INVALID_ARGUMENT naming --max-dp-size", tc.max, tc.over, err)
		}
	}
	for _, bad := range []int{-1, 1<<16 + 1} {
		if _, err := NewAdminWithOptions(nil, &fakeTopology{}, AdminOptions{MaxDPSize: bad}); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("MaxDPSize %d: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}

// TestAdminLogsCalls: every call is logged at Info with the method, the
// arguments, the peer and, over mutual TLS (through WithTransportInfo),
// the client certificate's subject; refused calls share one line per
// interval, counting the rest.
func TestAdminLogsCalls(t *testing.T) {
	t.Parallel()
	logs := &sharedtest.LockedBuffer{}
	a, err := NewAdminWithOptions(nil, &fakeTopology{}, AdminOptions{
		Token: "adm1n", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a.Handler())
	h := WithTransportInfo(mux)
	call := func(token string) int {
		req := httptest.NewRequest(http.MethodPost, loadreporterv1connect.AdminServiceSetTopologyProcedure, strings.NewReader(`{"dpSize":3}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.RemoteAddr = "10.1.2.3:4567"
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "ops"}}}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := call("adm1n"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	lines := logs.Lines("admin call")
	if len(lines) != 1 {
		t.Fatalf("log lines %q, want one", lines)
	}
	for _, want := range []string{"level=INFO", "method=/loadreporter.v1.AdminService/SetTopology", "peer=10.1.2.3:4567",
		`client_cert="CN=ops"`, "args=", "dp_size", "outcome=ok", "time="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %q lacks %s", lines[0], want)
		}
	}
	for range 3 {
		if code := call("router"); code != http.StatusForbidden {
			t.Fatalf("status %d, want 403", code)
		}
	}
	refused := logs.Lines("admin call refused")
	if len(refused) != 1 || !strings.Contains(refused[0], "outcome=permission_denied") || !strings.Contains(refused[0], "suppressed=0") {
		t.Errorf("refused lines %q, want one", refused)
	}
}

// echoSim refuses every mode, quoting it as the simulator does.
type echoSim struct{}

func (echoSim) SetMode(spec string) error {
	return domain.Errorf(domain.CodeInvalidArgument, "unknown sim mode %q", spec)
}
func (echoSim) State() (string, int) { return "normal", 1 }

// TestAdminLogLinesAreShort: a call's line repeats its arguments and its
// error cut short, so 60 KB of mode per call cannot turn into 60 KB of log
// per call.
func TestAdminLogLinesAreShort(t *testing.T) {
	t.Parallel()
	logs := &sharedtest.LockedBuffer{}
	a, err := NewAdminWithOptions(echoSim{}, &fakeTopology{}, AdminOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a.Handler())
	body := `{"mode":"` + strings.Repeat("x", 60000) + `"}`
	req := httptest.NewRequest(http.MethodPost, loadreporterv1connect.AdminServiceSetSimModeProcedure, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", rec.Code)
	}
	lines := logs.Lines("admin call")
	if len(lines) != 1 || len(lines[0]) > 2048 || !strings.Contains(lines[0], "unknown sim mode") {
		t.Fatalf("%d lines, the first %d bytes: want one line under 2 KiB naming the error", len(lines), len(lines[0]))
	}
}
