package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/orca"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
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
func NewReadiness(c ServerConfig, pc PollConfig, p pollapi.Poller) *Readiness {
	r := &Readiness{ready: make(chan struct{})}
	if c.ReadyRequiresLoad {
		r.poller, r.maxAge = p, pollAge(pc)
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

// Routes are the handlers served on the one port.
type Routes struct {
	Monitor   *rpc.Monitor
	Watch     *rpc.Watch
	Admin     *rpc.Admin
	History   *rpc.History
	ORCA      *orca.Service
	Poll      *pollapi.Handler
	Dashboard *web.Handler
	Health    *Health
	Ready     *Readiness
	Metrics   *metrics.Metrics
	// Stalls ends the lease-less streams (Watch, ORCA) whose client
	// stopped reading.
	Stalls *rpc.Stalls
}

// Bounds is what every request of the port goes through besides the
// access check: the port's bounds on peers, and at shutdown the final
// write's (serving.Port.Wrap).
type Bounds func(http.Handler) http.Handler

// NewBounds bounds every request of the port; every stream, not only
// Monitor's, ends within --final-write-timeout once the reporter shuts
// down: a browser or ORCA client that stopped reading must not hold the
// shutdown to its grace. Monitor's body lasts as long as the session,
// which bounds itself (a first frame in time, a frame budget, a lease).
func NewBounds(c StreamsConfig, loop *fireloop.Loop) Bounds {
	return func(h http.Handler) http.Handler {
		return c.Port.Wrap(h, loop.ShuttingDown(), c.Monitor.FinalWriteTimeout, monitorRoute)
	}
}

// NewHandler routes everything served on the one port, behind the access
// check and the port's bounds. A Monitor stream on a native gRPC
// connection is served once this handler returned (package rpc): a
// handler wrapped around it here must do nothing after its handler
// returns that the stream's end should wait for.
func NewHandler(r Routes, a *Access, bound Bounds) http.Handler {
	mux := http.NewServeMux()
	// Every request of every service on the port, health and reflection
	// included, is bounded alike.
	limit := connect.WithReadMaxBytes(serving.MaxRequestBytes)
	mux.Handle(r.Monitor.Handler(limit))
	// Browsers' and ORCA clients' streams hold no lease: a write blocked
	// for --stalled-write-timeout ends them.
	mux.Handle(r.Stalls.Wrap(r.Watch.Handler(limit)))
	mux.Handle(r.Admin.Handler(limit))
	mux.Handle(r.History.Handler(limit))
	mux.Handle(r.Stalls.Wrap(r.ORCA.Handler(limit)))
	mux.Handle(pollapi.Route, r.Poll)
	mux.HandleFunc(pollapi.GetLoadRoute, r.Poll.ServeGetLoad)
	mux.Handle(pollapi.GetLoadsProcedure, r.Poll.GetLoadsHandler(limit))
	mux.Handle(grpchealth.NewHandler(r.Health, limit))
	reflector := grpcreflect.NewStaticReflector(loadmonitorv1connect.LoadMonitorServiceName,
		loadreporterv1connect.WatchServiceName, loadreporterv1connect.AdminServiceName,
		loadreporterv1connect.HistoryServiceName, orca.ServiceName, grpchealth.HealthV1ServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, limit))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, limit))
	mux.Handle("GET /metrics", r.Metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		if why := r.Ready.check(req.Context()); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	r.Dashboard.Register(mux)
	return bound(a.guard(answerUnknownRPCs(mux), limit))
}

// answerUnknownRPCs answers a gRPC, gRPC-Web or Connect call to a method
// the port does not serve with the status UNIMPLEMENTED in the caller's
// protocol (a gRPC client reads a plain-text 404 as a transport failure
// and logs a parse error); everything else goes to mux.
func answerUnknownRPCs(mux *http.ServeMux) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && errs.IsSupported(r) && !knownProcedure(mux, r) {
			_ = errs.Write(w, r, connect.NewError(connect.CodeUnimplemented,
				fmt.Errorf("method %s is not served here", domain.Shorten(r.URL.Path, 200))))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

var monitorRoute = "/" + loadmonitorv1connect.LoadMonitorServiceName + "/"

// knownProcedure reports whether the mux serves r's path as an RPC: a
// route of its own, and, under a service's route, a method the service
// declares (a service's handler takes any path under its name: Monitor
// would answer /Nope as Monitor).
func knownProcedure(mux *http.ServeMux, r *http.Request) bool {
	if _, pattern := mux.Handler(r); pattern == "" {
		return false
	}
	service, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok {
		return true
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return true // not a service of ours: the route decides
	}
	sd, isService := d.(protoreflect.ServiceDescriptor)
	return !isService || sd.Methods().ByName(protoreflect.Name(method)) != nil
}

// NewServer returns the HTTP server for the one port: HTTP/1.1 and HTTP/2
// (h2c without TLS), TLS and mutual TLS with t.
func NewServer(c ServerConfig, streams StreamsConfig, h http.Handler, t *TLS, log *slog.Logger) (*http.Server, error) {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return nil, fmt.Errorf("--listen %q: want HOST:PORT: %v", c.Listen, err)
	}
	if c.ShutdownGrace <= 0 {
		return nil, fmt.Errorf("--shutdown-grace %s: must be > 0", c.ShutdownGrace)
	}
	if fw := cmp.Or(streams.Monitor.FinalWriteTimeout, rpc.DefaultFinalWriteTimeout); fw >= c.ShutdownGrace {
		return nil, fmt.Errorf("--final-write-timeout %s: must be below --shutdown-grace %s", fw, c.ShutdownGrace)
	}
	if err := streams.Port.Check(); err != nil {
		return nil, err
	}
	srv := streams.Port.NewServer(h, log, t != nil)
	if t != nil {
		srv.TLSConfig = t.Config()
	}
	return srv, nil
}

// TLS is the port's TLS: --tls-cert and --tls-key, reloaded when the files
// change, and client certificates with --tls-client-ca; the front's too
// with --front-tls.
type TLS struct {
	certs     *certReloader
	clientCAs *x509.CertPool // nil without --tls-client-ca
}

// NewTLS loads the port's key pair and client CA; nil without --tls-cert.
func NewTLS(c SecurityConfig, log *slog.Logger) (*TLS, error) {
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return nil, fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key")
	case c.TLSCert == "":
		return nil, nil
	}
	certs, err := newCertReloader(c.TLSCert, c.TLSKey, time.Second, log)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	t := &TLS{certs: certs}
	if c.TLSClientCA != "" {
		pem, err := os.ReadFile(c.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		t.clientCAs = x509.NewCertPool()
		if !t.clientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate found", c.TLSClientCA)
		}
	}
	return t, nil
}

// Config is a server's tls.Config, one per server (Serve adjusts it).
func (t *TLS) Config() *tls.Config {
	cfg := &tls.Config{GetCertificate: t.certs.GetCertificate, MinVersion: tls.VersionTLS12}
	if t.clientCAs != nil {
		cfg.ClientCAs = t.clientCAs
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// NativePort serves the port's native gRPC connections, those whose
// first request is gRPC over h2c, through grpc-go's own transport; every
// other connection stays with the HTTP server. It is nil with TLS (the
// first request is not seen before the handshake net/http does) and
// with --native-grpc=false.
type NativePort struct {
	srv *grpc.Server
	// firstRequest bounds how long a new connection may take to show
	// what it is before it goes to the HTTP server as it is.
	firstRequest time.Duration
}

// NewNativePort returns the native gRPC server of the port, serving h,
// the port's one handler, under the HTTP server's bounds.
func NewNativePort(c ServerConfig, streams StreamsConfig, h http.Handler, t *TLS, log *slog.Logger) (*NativePort, error) {
	if !c.NativeGRPC || t != nil {
		return nil, nil
	}
	o := serving.NativeOptions(streams.Port)
	o.Logger = log
	srv, err := rpc.NewNativeServer(h, o)
	if err != nil {
		return nil, err
	}
	return &NativePort{srv: srv, firstRequest: serving.FirstRequestTimeout}, nil
}
