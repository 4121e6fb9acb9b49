package app

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/front"
	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/source/sglanggrpc"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/serving"
	"github.com/loadreporter/loadreporter/domain/forwarded"
)

// Front is the front mode's server at the worker's public address; nil
// when --front-listen is not set.
type Front struct {
	server *http.Server
	engine string
	listen string
	drain  time.Duration
}

// engine is where the front passes requests, and whether it is spoken
// HTTP/2 without TLS (an engine's gRPC server).
func (f FrontConfig) engine(src SourceConfig) (*url.URL, bool, error) {
	flag, raw := "--front-engine-url", f.EngineURL
	if raw == "" {
		flag, raw = "--engine-url", src.EngineURL
	}
	if raw == "" {
		return nil, false, fmt.Errorf("--front-listen needs --front-engine-url or --engine-url: where requests are passed")
	}
	h2c := false
	switch {
	case strings.HasPrefix(raw, "grpc://"):
		raw, h2c = "http://"+strings.TrimPrefix(raw, "grpc://"), true
	case flag == "--engine-url" && src.Name == sglanggrpc.Name:
		// The source's own address forms: host:port, grpc:// or http://,
		// all the scheduler's gRPC server.
		raw, h2c = "http://"+strings.TrimPrefix(raw, "http://"), true
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, false, fmt.Errorf("%s %q: want http://HOST:PORT (or grpc://HOST:PORT for an engine's gRPC server)", flag, raw)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, false, fmt.Errorf("%s %q: want the engine's address without a path or query", flag, raw)
	}
	u.Path = ""
	return u, h2c, nil
}

// NewFront builds the front when --front-listen is set: the engine's API
// passed through, the pollers' load endpoints answered from poll, the
// engine's /metrics served from one scrape per --poll-max-age.
func NewFront(c FrontConfig, srv ServerConfig, src SourceConfig, streams StreamsConfig, t *TLS,
	poll *pollapi.Handler, fwd *forwarded.Ledger, m *metrics.Metrics, log *slog.Logger) (*Front, error) {
	if c.Listen == "" {
		if c.EngineURL != "" {
			return nil, fmt.Errorf("--front-engine-url needs --front-listen (the worker's public address)")
		}
		return nil, nil
	}
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return nil, fmt.Errorf("--front-listen %q: want HOST:PORT: %v", c.Listen, err)
	}
	if c.Listen == srv.Listen && port != "0" {
		return nil, fmt.Errorf("--front-listen %s: must differ from --listen (the reporter's own port)", c.Listen)
	}
	if c.TLS && t == nil {
		return nil, fmt.Errorf("--front-tls needs --tls-cert and --tls-key")
	}
	if c.Drain < 0 {
		return nil, fmt.Errorf("--front-drain %s: must not be negative (0: stop taking requests at once)", c.Drain)
	}
	if c.Drain >= srv.ShutdownGrace/2 {
		return nil, fmt.Errorf("--front-drain %s: must be below half --shutdown-grace %s (requests in flight need the rest)", c.Drain, srv.ShutdownGrace)
	}
	engine, h2c, err := c.engine(src)
	if err != nil {
		return nil, err
	}
	fm := m.Front(front.Classes)
	if fwd != nil {
		m.Forwarded(func() float64 { return float64(fwd.Added()) }, func() float64 { return float64(fwd.Held()) })
	}
	h, err := front.New(front.Options{
		Engine: engine,
		H2C:    h2c,
		Answered: []front.Route{
			{Method: http.MethodGet, Path: "/v1/loads", Handler: poll},
			{Method: http.MethodGet, Path: "/get_load", Handler: http.HandlerFunc(poll.ServeGetLoad)},
			// A gRPC engine's poll (SMG's gRPC mode); the rest of its
			// scheduler service is passed through.
			{Method: http.MethodPost, Path: pollapi.GetLoadsProcedure, Handler: poll.GetLoadsHandler(connect.WithReadMaxBytes(serving.MaxRequestBytes))},
		},
		APIKey:                src.EngineAPIKey,
		MetricsMaxAge:         poll.MaxAge(),
		ResponseHeaderTimeout: c.ResponseHeaderTimeout,
		MaxInFlight:           c.MaxRequests,
		Forwarded:             fwd,
		Observer:              front.Observer{Proxied: fm.Proxied, Scrape: fm.Scrape, Refused: fm.Refused},
		Logger:                log,
	})
	if err != nil {
		return nil, err
	}
	server := streams.Port.NewServer(h, log, c.TLS)
	if c.TLS {
		server.TLSConfig = t.Config()
	}
	return &Front{server: server, engine: engine.Redacted(), listen: c.Listen, drain: c.Drain}, nil
}
