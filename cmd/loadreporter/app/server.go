package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/orca"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/hostcheck"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/serving"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/web"
)

// Health is the gRPC health checker; Main marks services not serving on
// shutdown.
type Health = grpchealth.StaticChecker

// NewHealth returns a checker that reports the served services.
func NewHealth() *Health {
	return grpchealth.NewStaticChecker(loadmonitorv1connect.LoadMonitorServiceName,
		loadreporterv1connect.WatchServiceName, loadreporterv1connect.AdminServiceName,
		loadreporterv1connect.HistoryServiceName, orca.ServiceName)
}

// Readiness answers /readyz: ready once the port accepts sessions and,
// with --ready-requires-load, only while the latest report (at most
// --poll-max-age old, pulled for the probe if need be) is not UNREACHABLE.
type Readiness struct {
	ready  chan struct{}
	poller pollapi.Poller // nil unless --ready-requires-load
	maxAge time.Duration
}

// NewReadiness returns a not-yet-ready state.
func NewReadiness(c Config, p pollapi.Poller) *Readiness {
	r := &Readiness{ready: make(chan struct{})}
	if c.ReadyRequiresLoad {
		r.poller, r.maxAge = p, pollAge(c)
	}
	return r
}

// check returns why the service is not ready, or "" when it is.
func (r *Readiness) check(ctx context.Context) string {
	select {
	case <-r.ready:
	default:
		return "not ready: the port does not accept sessions yet"
	}
	if r.poller == nil {
		return ""
	}
	rep, err := r.poller.Poll(ctx, r.maxAge)
	switch {
	case err != nil:
		return "not ready: " + domain.ErrorMessage(err)
	case rep.Status == domain.StatusUnreachable:
		return "not ready: the engine is unreachable: " + rep.LastError
	}
	return ""
}

// NewHandler assembles everything served on the one port.
func NewHandler(c Config, loop *fireloop.Loop, monitor *rpc.Monitor, watch *rpc.Watch, admin *rpc.Admin, history *rpc.History,
	orcaSvc *orca.Service, poll *pollapi.Handler, dashboard *web.Handler, health *Health, m *metrics.Metrics, ready *Readiness,
	stalls *rpc.Stalls) http.Handler {
	mux := http.NewServeMux()
	// Every request of every service on the port, health and reflection
	// included, is bounded alike.
	limit := connect.WithReadMaxBytes(serving.MaxRequestBytes)
	mux.Handle(monitor.Handler(limit))
	// Browsers' and ORCA clients' streams hold no lease: a write blocked
	// for --stalled-write-timeout ends them.
	mux.Handle(stalls.Wrap(watch.Handler(limit)))
	mux.Handle(admin.Handler(limit))
	mux.Handle(history.Handler(limit))
	mux.Handle(stalls.Wrap(orcaSvc.Handler(limit)))
	mux.Handle(pollapi.Route, poll)
	mux.HandleFunc(pollapi.GetLoadRoute, poll.ServeGetLoad)
	mux.Handle(pollapi.GetLoadsProcedure, poll.GetLoadsHandler(limit))
	mux.Handle(grpchealth.NewHandler(health, limit))
	reflector := grpcreflect.NewStaticReflector(loadmonitorv1connect.LoadMonitorServiceName,
		loadreporterv1connect.WatchServiceName, loadreporterv1connect.AdminServiceName,
		loadreporterv1connect.HistoryServiceName, orca.ServiceName, grpchealth.HealthV1ServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, limit))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, limit))
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := ready.check(r.Context()); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	dashboard.Register(mux)
	var h http.Handler = answerUnknownRPCs(mux)
	if c.AuthToken == "" {
		guarded := hostcheck.Guard(c.Listen, splitList(c.AllowedHosts), "add it with --allowed-host, or set --auth-token", h)
		served := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if servedToAnyName(r) {
				served.ServeHTTP(w, r)
				return
			}
			guarded.ServeHTTP(w, r)
		})
	} else {
		h = requireToken(c.AuthToken, c.AdminToken, c.AuthScope, h, limit)
	}
	// Every stream, not only Monitor's, ends within the final-write bound
	// once the reporter shuts down: a browser or ORCA client that stopped
	// reading must not hold the shutdown to its grace. Monitor's body lasts
	// as long as the session, which bounds itself (a first frame in time, a
	// frame budget, a lease).
	return c.Port.Wrap(h, loop.ShuttingDown(), c.Monitor.FinalWriteTimeout, monitorRoute)
}

// answerUnknownRPCs answers a gRPC, gRPC-Web or Connect call to a method
// the port does not serve with the status UNIMPLEMENTED in the caller's
// protocol (a gRPC client reads a plain-text 404 as a transport failure
// and logs a parse error); everything else goes to mux.
func answerUnknownRPCs(mux *http.ServeMux) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" && r.Method == http.MethodPost && errs.IsSupported(r) {
			_ = errs.Write(w, r, connect.NewError(connect.CodeUnimplemented,
				fmt.Errorf("method %s is not served here", domain.Shorten(r.URL.Path, 200))))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

var monitorRoute = "/" + loadmonitorv1connect.LoadMonitorServiceName + "/"

// NewServer returns the HTTP server for the one port: HTTP/1.1 and HTTP/2
// (h2c without TLS), TLS and mutual TLS by flags.
func NewServer(c Config, h http.Handler, log *slog.Logger) (*http.Server, error) {
	srv := c.Port.NewServer(h, log, c.TLSCert != "")
	if c.TLSCert == "" {
		return srv, nil
	}
	var err error
	srv.TLSConfig, err = serverTLS(c, log)
	return srv, err
}

// serverTLS is the TLS of a port: --tls-cert and --tls-key, reloaded when
// the files change, and client certificates with --tls-client-ca.
func serverTLS(c Config, log *slog.Logger) (*tls.Config, error) {
	certs, err := newCertReloader(c.TLSCert, c.TLSKey, time.Second, log)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12}
	if c.TLSClientCA != "" {
		pem, err := os.ReadFile(c.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate found", c.TLSClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// splitList reads a comma-separated flag value.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
