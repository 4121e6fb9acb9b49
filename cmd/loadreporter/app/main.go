package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/grpchealth"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/orca"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/ports"
)

// Main is the running service: the fire loop and the one port.
type Main struct {
	cfg      Config
	log      *slog.Logger
	loop     *fireloop.Loop
	engine   Engine
	history  *History
	recorder *recorder.Recorder // nil when history is off
	clock    ports.Clock
	server   *http.Server
	front    *Front // nil without --front-listen
	health   *Health
	ready    *Readiness
	metrics  *metrics.Metrics
	// cleanup releases what the providers opened (InitializeMain sets it);
	// it runs last in Close, and alone when Start never ran.
	cleanup func()

	ln            net.Listener
	frontLn       net.Listener
	frontDone     chan error
	stopLoop      context.CancelFunc
	loopDone      chan struct{}
	retentionDone chan struct{}
	serveDone     chan error
	closeOnce     sync.Once
	closeErr      error
}

// NewMain assembles a Main; Start runs it. rec is nil when history is off.
func NewMain(c Config, log *slog.Logger, clk ports.Clock, r *fireloop.Loop, e Engine, hist *History,
	rec *recorder.Recorder, srv *http.Server, f *Front, h *Health, ready *Readiness, m *metrics.Metrics) *Main {
	return &Main{cfg: c, log: log, clock: clk, loop: r, engine: e, history: hist, recorder: rec,
		server: srv, front: f, health: h, ready: ready, metrics: m, cleanup: func() {}}
}

// History is the history store in use.
func (m *Main) History() *History { return m.history }

// FireLoop is the fire loop (tests and admin handlers use it).
func (m *Main) FireLoop() *fireloop.Loop { return m.loop }

// Engine is the snapshot source in use.
func (m *Main) Engine() Engine { return m.engine }

// Addr is the address the port listens on, once started.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// FrontAddr is the address the front listens on once started, "" without
// --front-listen.
func (m *Main) FrontAddr() string {
	if m.frontLn == nil {
		return ""
	}
	return m.frontLn.Addr().String()
}

// Start brings the history database up (History.Start), listens on
// --listen and starts the fire loop, the history recorder, the retention
// and the server. It returns once the port accepts connections.
func (m *Main) Start() error {
	if err := m.history.Start(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", m.cfg.Listen, err)
	}
	if m.front != nil {
		fln, err := net.Listen("tcp", m.front.listen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("--front-listen %s: %w", m.front.listen, err)
		}
		m.frontLn = fln
	}
	m.ln = ln
	loopCtx, stop := context.WithCancel(context.Background())
	m.stopLoop = stop
	m.loopDone = make(chan struct{})
	m.retentionDone = make(chan struct{})
	if err := m.engine.Start(loopCtx); err != nil {
		stop()
		_ = ln.Close()
		if m.frontLn != nil {
			_ = m.frontLn.Close()
		}
		m.ln, m.frontLn = nil, nil // nothing runs: Close only releases
		return fmt.Errorf("--source %s: %w", m.cfg.Source, err)
	}
	if m.recorder != nil {
		m.recorder.Start()
	}
	go func() {
		defer close(m.loopDone)
		_ = m.loop.Run(loopCtx)
	}()
	go func() {
		defer close(m.retentionDone)
		if m.cfg.HistoryRetention <= 0 {
			return
		}
		_ = recorder.RunRetention(loopCtx, recorder.RetentionOptions{
			Store: m.history.Store, Clock: m.clock, Retention: m.cfg.HistoryRetention, Logger: m.log,
			Removed: m.metrics.Retention(),
		})
	}()
	m.serveDone = make(chan error, 1)
	useTLS := m.server.TLSConfig != nil // Serve adjusts TLSConfig: read it first
	go func() {
		var err error
		if useTLS {
			err = m.server.ServeTLS(ln, "", "")
		} else {
			err = m.server.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		m.serveDone <- err
	}()
	if m.front != nil {
		m.frontDone = make(chan error, 1)
		frontTLS := m.front.server.TLSConfig != nil
		go func() {
			var err error
			if frontTLS {
				err = m.front.server.ServeTLS(m.frontLn, "", "")
			} else {
				err = m.front.server.Serve(m.frontLn)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			m.frontDone <- err
		}()
		m.log.Info("front serving the worker's address", "addr", m.frontLn.Addr().String(), "engine", m.front.engine, "tls", frontTLS)
	}
	close(m.ready.ready)
	if m.cfg.AuthToken != "" && !useTLS && !isLoopback(ln.Addr()) {
		m.log.Warn("--auth-token is accepted over plaintext beyond loopback: anyone on the path can read it; add --tls-cert/--tls-key",
			"addr", ln.Addr().String())
	}
	for _, w := range m.cfg.warnings {
		m.log.Warn(w)
	}
	if m.cfg.AuthToken == "" && !isLoopback(ln.Addr()) {
		m.log.Warn("listening beyond loopback without --auth-token: anyone who reaches this port can read load and call AdminService",
			"addr", ln.Addr().String())
	}
	m.log.Info("loadreporter serving", "addr", ln.Addr().String(), "source", m.cfg.Source, "history", m.history.kind,
		"schedule", m.cfg.Schedule, "phase_slots", m.cfg.PhaseSlots, "tls", useTLS, "auth", m.cfg.AuthToken != "")
	return nil
}

// Run starts Main and serves until ctx ends or the server fails, then
// shuts down gracefully.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Start(); err != nil {
		return errors.Join(err, m.Close())
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-m.serveDone:
		m.serveDone <- serveErr // Close reads it again
	}
	return errors.Join(serveErr, m.Close())
}

// Close shuts down within the grace period: every stream gets
// SHUTTING_DOWN, the server drains, the fire loop stops, the recorder
// flushes, and what the providers opened is released. It is idempotent.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	defer m.cleanup()
	if m.ln == nil {
		return nil
	}
	start := time.Now()
	m.health.SetStatus("", grpchealth.StatusNotServing)
	m.health.SetStatus(loadmonitorv1connect.LoadMonitorServiceName, grpchealth.StatusNotServing)
	m.health.SetStatus(orca.ServiceName, grpchealth.StatusNotServing)
	m.loop.Shutdown()
	// The grace is shared out so that no phase can eat the next one's:
	// streams first, then the fire loop, and the history's flush keeps a
	// share of its own even when a stuck peer held the server to its limit.
	grace := m.cfg.ShutdownGrace
	streamsBy, loopBy := start.Add(grace*3/5), start.Add(grace*4/5)
	if m.recorder == nil {
		streamsBy, loopBy = start.Add(grace*4/5), start.Add(grace)
	}
	ctx, cancel := context.WithDeadline(context.Background(), streamsBy)
	defer cancel()
	frontErr := make(chan error, 1)
	go func() { frontErr <- m.closeFront(ctx) }()
	err := m.server.Shutdown(ctx)
	if err != nil {
		m.log.Warn("streams still open when their share of the grace ended; closing their connections",
			"grace", grace, "share", streamsBy.Sub(start).Round(time.Millisecond))
		err = m.server.Close()
	}
	err = errors.Join(err, <-frontErr)
	m.stopLoop()
	loopCtx, cancelLoop := context.WithDeadline(context.Background(), loopBy)
	defer cancelLoop()
	select {
	case <-m.loopDone:
	case <-loopCtx.Done():
		err = errors.Join(err, errors.New("fire loop did not stop within the grace period"))
	}
	<-m.retentionDone
	// The loop has stopped recording: flush what the recorder still holds,
	// until the end of the whole grace.
	if m.recorder != nil {
		flushCtx, cancelFlush := context.WithDeadline(context.Background(), start.Add(grace))
		defer cancelFlush()
		// What the history lost over the whole run and why: Close logs it,
		// or returns it when the grace ended first.
		err = errors.Join(err, m.recorder.Close(flushCtx))
	}
	if !m.history.CloseBy(start.Add(grace)) {
		m.log.Warn("history store still closing when the grace ended; exiting without it (its database does not answer)",
			"grace", grace)
	}
	if serveErr := <-m.serveDone; serveErr != nil {
		err = errors.Join(err, serveErr)
	}
	err = errors.Join(err, m.engine.Close())
	m.log.Info("loadreporter stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// closeFront lets the front's requests in flight finish until ctx ends,
// then closes their connections.
func (m *Main) closeFront(ctx context.Context) error {
	if m.frontDone == nil {
		return nil // never served
	}
	if err := m.front.server.Shutdown(ctx); err != nil {
		m.log.Warn("front requests still in flight when their share of the grace ended; closing their connections")
		_ = m.front.server.Close()
	}
	return <-m.frontDone
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
