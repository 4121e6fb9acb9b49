package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/grpchealth"
	"google.golang.org/grpc"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/orca"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/connsplit"
	"github.com/loadreporter/loadreporter/ports"
)

// Main is the running service: the fire loop and the one port.
type Main struct {
	p Parts
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
	split         *connsplit.Splitter // nil without a native port
	nativeDone    chan error
	splitDone     chan error // the splitter's accept loop ended, and why
	closeOnce     sync.Once
	closeErr      error
}

// Parts are what Main runs, as the providers built them. Recorder is nil
// when history is off, Retention without --history-retention, Front
// without --front-listen.
type Parts struct {
	Server    ServerConfig
	Fire      FireConfig
	Log       *slog.Logger
	Clock     ports.Clock
	Loop      *fireloop.Loop
	Engine    Engine
	History   *History
	Recorder  *recorder.Recorder
	Retention *recorder.Retention
	HTTP      *http.Server
	Native    *NativePort
	Front     *Front
	Health    *Health
	Ready     *Readiness
	Metrics   *metrics.Metrics
	Access    *Access
}

// NewMain assembles a Main; Start runs it.
func NewMain(p Parts) *Main { return &Main{p: p, cleanup: func() {}} }

// FireLoop is the fire loop (tests and admin handlers use it).
func (m *Main) FireLoop() *fireloop.Loop { return m.p.Loop }

// History is the history store in use.
func (m *Main) History() *History { return m.p.History }

// Engine is the snapshot source in use.
func (m *Main) Engine() Engine { return m.p.Engine }

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
	if err := m.p.History.Start(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.p.Server.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", m.p.Server.Listen, err)
	}
	if m.p.Front != nil {
		fln, err := net.Listen("tcp", m.p.Front.listen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("--front-listen %s: %w", m.p.Front.listen, err)
		}
		m.frontLn = fln
	}
	m.ln = ln
	loopCtx, stop := context.WithCancel(context.Background())
	m.stopLoop = stop
	m.loopDone = make(chan struct{})
	m.retentionDone = make(chan struct{})
	if err := m.p.Engine.Start(loopCtx); err != nil {
		stop()
		_ = ln.Close()
		if m.frontLn != nil {
			_ = m.frontLn.Close()
		}
		m.ln, m.frontLn = nil, nil // nothing runs: Close only releases
		return fmt.Errorf("--source %s: %w", m.p.Engine.name, err)
	}
	if m.p.Recorder != nil {
		m.p.Recorder.Start()
	}
	go func() {
		defer close(m.loopDone)
		_ = m.p.Loop.Run(loopCtx)
	}()
	go func() {
		defer close(m.retentionDone)
		if m.p.Retention != nil {
			_ = m.p.Retention.Run(loopCtx)
		}
	}()
	useTLS := m.p.HTTP.TLSConfig != nil // Serve adjusts TLSConfig: read it first
	var httpLn net.Listener = ln
	if m.p.Native != nil {
		split, err := connsplit.New(ln, connsplit.Options{FirstRequestTimeout: m.p.Native.firstRequest, Logger: m.p.Log})
		if err != nil {
			return err // a constant of ours: cannot happen
		}
		m.split, httpLn = split, split.Other()
		m.p.Metrics.WatchPortConnections(split.Counts)
		m.splitDone = make(chan error, 1)
		go func() {
			err := split.Serve()
			if err != nil {
				m.p.Log.Error("the port stopped accepting connections", "err", err)
			}
			m.splitDone <- err
		}()
		// Read as grpc-go reads a bare TCP connection: an idle router's
		// connection holds no 32 KiB read buffer.
		m.nativeDone = serveNative(m.p.Native.srv, rpc.PooledReads(split.GRPC()))
	}
	m.serveDone = serve(m.p.HTTP, httpLn, useTLS)
	if m.p.Front != nil {
		frontTLS := m.p.Front.server.TLSConfig != nil
		m.frontDone = serve(m.p.Front.server, m.frontLn, frontTLS)
		m.p.Log.Info("front serving the worker's address", "addr", m.frontLn.Addr().String(), "engine", m.p.Front.engine, "tls", frontTLS)
	}
	close(m.p.Ready.ready)
	token := m.p.Access.c.AuthToken != ""
	if token && !useTLS && !isLoopback(ln.Addr()) {
		m.p.Log.Warn("--auth-token is accepted over plaintext beyond loopback: anyone on the path can read it; add --tls-cert/--tls-key",
			"addr", ln.Addr().String())
	}
	for _, w := range m.p.Access.warnings() {
		m.p.Log.Warn(w)
	}
	if !token && !isLoopback(ln.Addr()) {
		m.p.Log.Warn("listening beyond loopback without --auth-token: anyone who reaches this port can read load and call AdminService",
			"addr", ln.Addr().String())
	}
	m.p.Log.Info("loadreporter serving", "addr", ln.Addr().String(), "source", m.p.Engine.name, "history", m.p.History.kind,
		"schedule", m.p.Fire.Schedule, "phase_slots", phaseSlots{&m.p.Fire.PhaseSlots}.String(), "tls", useTLS, "auth", token)
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
	case serveErr = <-m.nativeDone: // nil without a native port: never ready
		m.nativeDone <- serveErr
	case serveErr = <-m.splitDone: // the listener failed: the servers' nil says nothing
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
	m.p.Health.SetStatus("", grpchealth.StatusNotServing)
	m.p.Health.SetStatus(loadmonitorv1connect.LoadMonitorServiceName, grpchealth.StatusNotServing)
	m.p.Health.SetStatus(orca.ServiceName, grpchealth.StatusNotServing)
	m.p.Loop.Shutdown()
	// The grace is shared out so that no phase can eat the next one's:
	// streams first, then the fire loop, and the history's flush keeps a
	// share of its own even when a stuck peer held the server to its limit.
	grace := m.p.Server.ShutdownGrace
	streamsBy, loopBy := start.Add(grace*3/5), start.Add(grace*4/5)
	if m.p.Recorder == nil {
		streamsBy, loopBy = start.Add(grace*4/5), start.Add(grace)
	}
	ctx, cancel := context.WithDeadline(context.Background(), streamsBy)
	defer cancel()
	// The front's requests are the engine's, not the reporter's: they may
	// run to the end of the whole grace while the phases below go on.
	frontCtx, cancelFront := context.WithDeadline(context.Background(), start.Add(grace))
	defer cancelFront()
	frontErr := make(chan error, 1)
	go func() { frontErr <- m.closeFront(frontCtx) }()
	err := m.shutdownPort(ctx)
	if err != nil {
		m.p.Log.Warn("streams still open when their share of the grace ended; closing their connections",
			"grace", grace, "share", streamsBy.Sub(start).Round(time.Millisecond))
		err = m.closePort()
	}
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
	if m.p.Recorder != nil {
		flushCtx, cancelFlush := context.WithDeadline(context.Background(), start.Add(grace))
		defer cancelFlush()
		// What the history lost over the whole run and why: Close logs it,
		// or returns it when the grace ended first.
		err = errors.Join(err, m.p.Recorder.Close(flushCtx))
	}
	if !m.p.History.CloseBy(start.Add(grace)) {
		m.p.Log.Warn("history store still closing when the grace ended; exiting without it (its database does not answer)",
			"grace", grace)
	}
	if serveErr := <-m.serveDone; serveErr != nil {
		err = errors.Join(err, serveErr)
	}
	if m.nativeDone != nil {
		err = errors.Join(err, <-m.nativeDone)
	}
	err = errors.Join(err, <-frontErr)
	err = errors.Join(err, m.p.Engine.Close())
	m.p.Log.Info("loadreporter stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// shutdownPort stops the port taking connections and waits, until ctx
// ends, for its streams to finish, on both servers at once.
func (m *Main) shutdownPort(ctx context.Context) error {
	if m.p.Native == nil {
		return m.p.HTTP.Shutdown(ctx)
	}
	// The listener first: a connection that comes now is refused, not
	// taken and then dropped after its first request went out; those
	// still being looked at go with it.
	err := ignoreClosed(m.split.Close())
	native := make(chan struct{})
	go func() {
		defer close(native)
		m.p.Native.srv.GracefulStop()
	}()
	err = errors.Join(err, m.p.HTTP.Shutdown(ctx))
	select {
	case <-native:
	case <-ctx.Done():
		err = cmp.Or(err, ctx.Err())
	}
	return err
}

// closePort closes every connection of the port.
func (m *Main) closePort() error {
	err := m.p.HTTP.Close()
	if m.p.Native != nil {
		m.p.Native.srv.Stop()
		err = errors.Join(err, ignoreClosed(m.split.Close()))
	}
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// serveNative runs srv on ln until it is stopped, and sends on the
// channel returned why it stopped (nil once stopped).
func serveNative(srv *grpc.Server, ln net.Listener) chan error {
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
		done <- err
	}()
	return done
}

// closeFront keeps the front taking requests for its drain (the fire
// loop has shut down: its load endpoints answer "shutting down", so
// polling routers steer away rather than meet a refused connection), then
// lets the requests in flight finish until ctx ends, then closes their
// connections.
func (m *Main) closeFront(ctx context.Context) error {
	if m.frontDone == nil {
		return nil // never served
	}
	drain := time.NewTimer(m.p.Front.drain)
	select {
	case <-drain.C:
	case <-ctx.Done():
		drain.Stop()
	}
	if err := m.p.Front.server.Shutdown(ctx); err != nil {
		m.p.Log.Warn("front requests still in flight when the grace ended; closing their connections")
		_ = m.p.Front.server.Close()
	}
	return <-m.frontDone
}

// serve runs srv on ln until it is shut down, and sends on the channel
// returned why it stopped (nil once shut down).
func serve(srv *http.Server, ln net.Listener, useTLS bool) chan error {
	done := make(chan error, 1)
	go func() {
		var err error
		if useTLS {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			err = nil // shut down (a split port's listener closes first)
		}
		done <- err
	}()
	return done
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
