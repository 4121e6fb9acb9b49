package enginesim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// maxBodyBytes bounds a request body: a full 128k-token context is about
// half a megabyte of text.
const maxBodyBytes = 16 << 20

// Main is the engine-sim command's composition: the model, its driver,
// the HTTP API and, when asked, the load sockets. New, then Start (or
// Run), then Close.
type Main struct {
	cfg     Config
	clock   ports.Clock
	log     *slog.Logger
	drv     *driver
	met     *metrics
	pub     *loadPublisher
	srv     *http.Server
	grpc    *http.Server // nil without --grpc-listen
	started time.Time

	ln     net.Listener
	grpcLn net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup
	served chan error
	once   sync.Once
}

// New checks c and builds the engine; nothing listens until Start.
func New(c Config) (*Main, error) {
	if err := c.Check(); err != nil {
		return nil, domain.Wrap(err, domain.CodeInvalidArgument, "engine-sim")
	}
	m := &Main{cfg: c, clock: c.Clock, log: c.Logger}
	if m.clock == nil {
		m.clock = clock.System{}
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.started = m.clock.Now()
	eng, err := model.New(c.Params, m.started)
	if err != nil {
		return nil, err
	}
	m.met = newMetrics(c)
	m.drv = newDriver(eng, m.clock, hooks{
		published: func(rank int, l model.Load) {
			if m.pub != nil {
				m.pub.publish(rank, l)
			}
		},
		metrics: m.met.snapshot,
		token:   m.met.token,
		finished: func(f *flight, st model.RequestStats) {
			m.met.finished(f, st)
			if c.RequestDone != nil && !f.quiet {
				c.RequestDone(st)
			}
		},
		submitted: m.met.submitted,
	})
	for r := range c.Params.DPSize {
		m.met.snapshot(r, eng.Metrics(r))
	}
	m.srv = &http.Server{Handler: m.routes(), ReadHeaderTimeout: 10 * time.Second}
	if c.GRPCListen != "" {
		var protocols http.Protocols
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
		m.grpc = &http.Server{Handler: m.auth(newGRPCService(m).handler()), Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second}
	}
	return m, nil
}

// Start listens on the API address and the load sockets and starts the
// engine. It returns once both accept connections.
func (m *Main) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", m.cfg.Listen)
	if err != nil {
		return domain.Wrap(err, domain.CodeUnavailable, "engine-sim: listening on --listen %s", m.cfg.Listen)
	}
	if m.grpc != nil {
		if m.grpcLn, err = net.Listen("tcp", m.cfg.GRPCListen); err != nil {
			_ = ln.Close()
			return domain.Wrap(err, domain.CodeUnavailable, "engine-sim: listening on --grpc-listen %s", m.cfg.GRPCListen)
		}
	}
	if m.cfg.LoadPublishEndpoint != "" {
		if m.pub, err = bindLoadPublisher(m.cfg.LoadPublishEndpoint, m.cfg.Params.DPSize, m.clock); err != nil {
			_ = ln.Close()
			if m.grpcLn != nil {
				_ = m.grpcLn.Close()
			}
			return domain.Wrap(err, domain.CodeUnavailable, "engine-sim")
		}
		for r, l := range m.drv.loads() {
			m.pub.publish(r, l)
		}
	}
	m.ln = ln
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.served = make(chan error, 2)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.drv.run(ctx)
	}()
	if m.pub != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.pub.run(ctx)
		}()
	}
	go func() { m.served <- m.srv.Serve(ln) }()
	if m.grpc != nil {
		go func() { m.served <- m.grpc.Serve(m.grpcLn) }()
	}
	attrs := []any{"listen", m.Addr(), "model", m.cfg.ServedModelName, "dp_size", m.cfg.Params.DPSize,
		"max_running_requests", m.cfg.Params.MaxRunningRequests, "max_total_tokens", m.cfg.Params.MaxTotalNumTokens,
		"step_overhead", m.cfg.Params.StepOverhead, "decode_per_seq", m.cfg.Params.DecodePerSeq,
		"prefill_per_token", m.cfg.Params.PrefillPerToken}
	if m.pub != nil {
		attrs = append(attrs, "load_sockets", m.pub.endpoint(0)+"..")
	}
	if m.grpcLn != nil {
		attrs = append(attrs, "grpc", m.GRPCAddr())
	}
	m.log.Info("engine-sim serving", attrs...)
	return nil
}

// Addr is the API's address once started.
func (m *Main) Addr() string {
	if m.ln == nil {
		return m.cfg.Listen
	}
	return m.ln.Addr().String()
}

// GRPCAddr is the gRPC service's address once started, "" without one.
func (m *Main) GRPCAddr() string {
	if m.grpcLn == nil {
		return ""
	}
	return m.grpcLn.Addr().String()
}

// Live is every rank's load as it stands now, as /get_load reports it
// but in full and without a request: a benchmark's oracle reads it at
// the instant of each dispatch.
func (m *Main) Live() []model.Load { return m.drv.live() }

// Run starts and serves until ctx ends or the server fails, then closes.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Start(ctx); err != nil {
		return err
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-m.served:
	}
	return errors.Join(err, m.Close())
}

// Close ends every request in flight as aborted, stops serving (bounded
// by the shutdown grace) and stops the engine. It is safe to call more
// than once.
func (m *Main) Close() error {
	var err error
	m.once.Do(func() {
		m.drv.shutdown()
		if m.ln == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownGrace)
		defer cancel()
		for _, srv := range []*http.Server{m.srv, m.grpc} {
			if srv == nil {
				continue
			}
			if e := srv.Shutdown(ctx); e != nil {
				err = errors.Join(err, e)
				_ = srv.Close()
			}
		}
		m.cancel()
		m.wg.Wait()
		if m.pub != nil {
			m.pub.close()
		}
		m.log.Info("engine-sim stopped", "listen", m.Addr())
	})
	return err
}

// routes are SGLang's HTTP API, as far as the simulated engine goes.
func (m *Main) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", m.health)
	mux.HandleFunc("GET /health_generate", m.health)
	mux.HandleFunc("POST /generate", m.generate)
	mux.HandleFunc("PUT /generate", m.generate)
	mux.HandleFunc("POST /v1/chat/completions", m.chat)
	mux.HandleFunc("GET /v1/models", m.models)
	mux.HandleFunc("GET /v1/loads", m.v1Loads)
	mux.HandleFunc("GET /get_load", m.getLoad)
	mux.HandleFunc("GET /server_info", m.serverInfo)
	mux.HandleFunc("GET /get_server_info", m.serverInfo)
	mux.HandleFunc("GET /get_model_info", m.modelInfo)
	mux.HandleFunc("GET /model_info", m.modelInfo)
	mux.HandleFunc("GET /version", m.version)
	mux.Handle("GET /metrics", m.met.handler())
	return m.auth(mux)
}

// auth requires the API key, when one is set, on every route but the
// health checks and /metrics, as SGLang's API-key middleware.
func (m *Main) auth(next http.Handler) http.Handler {
	if m.cfg.APIKey == "" {
		return next
	}
	want := "Bearer " + m.cfg.APIKey
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if r.Method == http.MethodOptions || strings.HasPrefix(p, "/health") || strings.HasPrefix(p, "/metrics") ||
			r.Header.Get("Authorization") == want {
			next.ServeHTTP(w, r)
			return
		}
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
	})
}

// writeJSON writes v as the whole response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"object":"error","message":"response did not encode","type":"InternalServerError","param":null,"code":500}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// errorBody is SGLang's ErrorResponse.
type errorBody struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// writeError answers err in SGLang's error shape: 400 for a request the
// engine refuses, 503 while shutting down, 500 otherwise.
func writeError(w http.ResponseWriter, err error) {
	status, typ := http.StatusInternalServerError, "InternalServerError"
	switch domain.ErrorCode(err) {
	case domain.CodeInvalidArgument:
		status, typ = http.StatusBadRequest, "BadRequestError"
	case domain.CodeShuttingDown, domain.CodeUnavailable:
		status, typ = http.StatusServiceUnavailable, "ServiceUnavailableError"
	}
	writeJSON(w, status, errorBody{Object: "error", Message: domain.ErrorMessage(err), Type: typ, Code: status})
}

// shuttingDown is the answer to a request the engine stopped under.
func shuttingDown() error { return domain.Errorf(domain.CodeShuttingDown, abortMessage) }

// badRequest is a refusal of the request's body.
func badRequest(format string, args ...any) error {
	return domain.Errorf(domain.CodeInvalidArgument, format, args...)
}

// decodeBody reads a JSON request body into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return badRequest("request body over %d bytes", int64(maxBodyBytes))
		}
		return badRequest("request body is not the JSON this endpoint takes: %s", domain.Shorten(err.Error(), 200))
	}
	return nil
}

// newRID is a request id as SGLang makes them (a uuid4's hex).
func newRID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// sse writes server-sent events, each flushed at once.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// data writes one "data: …" event; v is JSON-encoded unless it is
// already bytes. An error means the client is gone.
func (s *sse) data(v any) error {
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	if _, err := s.w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sse) done() error { return s.data([]byte("[DONE]")) }

// await waits until f has more than seen tokens or is done, or ctx ends.
func (m *Main) await(ctx context.Context, f *flight, seen int) (tokens int, done, aborted bool, st model.RequestStats, err error) {
	for {
		tokens, done, aborted, st = m.drv.state(f)
		if tokens > seen || done {
			return tokens, done, aborted, st, nil
		}
		select {
		case <-ctx.Done():
			return tokens, done, aborted, st, ctx.Err()
		case <-f.notify:
		}
	}
}
