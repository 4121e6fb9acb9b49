package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/loglimit"
)

// Registrar starts Monitor sessions: the one thing the Monitor handler asks
// of the core.
type Registrar interface {
	// Register validates a router's registration (docs/routers.md) and starts its
	// session, replacing a live one with the same router_id. Its errors are
	// *domain.Error: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, SHUTTING_DOWN.
	Register(routerID string, intervalMs, leaseMs int64) (RouterSession, session.Config, error)
	// ShuttingDown ends when the reporter starts shutting down: streams that
	// have not registered yet then end with SHUTTING_DOWN (registered ones
	// learn it from their session's end), and sends get a deadline.
	ShuttingDown() context.Context
}

// Outbox is what a session delivers, as the writer of a Monitor stream
// reads it.
type Outbox interface {
	// Take returns the session's latest undelivered report and empties
	// its outbox, or nil when none waits.
	Take() *domain.Report
	// Ended says whether the session ended; Err then says why.
	Ended() bool
	// Err is the *domain.Error that ended the session (LEASE_EXPIRED,
	// REPLACED, SHUTTING_DOWN, RESOURCE_EXHAUSTED), or nil.
	Err() error
}

// Controls is what a router's frames do to its session, as the reader of
// a Monitor stream applies them.
type Controls interface {
	// KeepAlive renews the lease; an error means the session has ended.
	KeepAlive() error
	// Update applies an update_config as a whole; INVALID_ARGUMENT leaves
	// the session unchanged, any other error means it has ended.
	Update(intervalMs, leaseMs *int64) (session.Config, error)
	// Reregister applies a second register on the same stream like Update;
	// a different router_id is INVALID_ARGUMENT.
	Reregister(routerID string, intervalMs, leaseMs int64) (session.Config, error)
}

// RouterSession is one router's live session as Registrar hands it to the
// Monitor handler, which gives its Outbox to the stream's writer and its
// Controls to the stream's reader; *fireloop.Subscription implements it.
type RouterSession interface {
	Outbox
	Controls
	// RouterID is the router_id the session registered with.
	RouterID() string
	// Notify makes the session call f, which must not block, whenever a
	// report is waiting to be taken or the session ended.
	Notify(f func())
	// Close ends the session if it is still live; it never touches a
	// session that replaced this one.
	Close()
}

var _ RouterSession = (*fireloop.Subscription)(nil)

// loopRegistrar adapts *fireloop.Loop, whose Register returns the concrete
// subscription, to Registrar.
type loopRegistrar struct{ loop *fireloop.Loop }

func (r loopRegistrar) Register(routerID string, intervalMs, leaseMs int64) (RouterSession, session.Config, error) {
	sub, cfg, err := r.loop.Register(routerID, intervalMs, leaseMs)
	if err != nil {
		return nil, cfg, err // no typed nil inside the interface
	}
	return sub, cfg, nil
}

func (r loopRegistrar) ShuttingDown() context.Context { return r.loop.ShuttingDown() }

// Monitor serves sglang.router.loadmonitor.v1.LoadMonitorService/Monitor.
type Monitor struct {
	reg    Registrar
	log    *slog.Logger
	opts   MonitorOptions
	frames *reportFrames
	pump   *pump // the native streams' sends

	// conns and peers are the frame budgets streams share.
	conns, peers *sharedBudgets

	pending            atomic.Int64
	firstFrameTimeouts atomic.Uint64
	overBudget         atomic.Uint64
	timeoutLog         loglimit.Limiter
	budgetLog          loglimit.Limiter
	ends               endTally
	noTransport        sync.Once
}

// NewMonitorWithOptions returns the Monitor service over the fire loop;
// o's errors are INVALID_ARGUMENT naming the option.
func NewMonitorWithOptions(loop *fireloop.Loop, o MonitorOptions) (*Monitor, error) {
	m, err := newMonitor(loopRegistrar{loop}, o)
	if err != nil {
		return nil, err
	}
	m.pump.behind = func() bool { return loop.Behind(m.opts.Clock.Now()) }
	return m, nil
}

func newMonitor(reg Registrar, o MonitorOptions) (*Monitor, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Monitor{reg: reg, log: o.Logger, opts: o, frames: newReportFrames(), pump: newPump(),
		conns: newSharedBudgets(o.MaxConnFramesPerSecond), peers: newSharedBudgets(o.MaxPeerFramesPerSecond)}
	m.timeoutLog.Every = o.AbuseLogInterval
	m.budgetLog.Every = o.AbuseLogInterval
	return m, nil
}

// PendingStreams is the number of open Monitor streams that have not
// registered yet: a gauge.
func (m *Monitor) PendingStreams() int64 { return m.pending.Load() }

// FirstFrameTimeouts counts streams ended for sending no register within
// FirstFrameTimeout: a counter.
func (m *Monitor) FirstFrameTimeouts() uint64 { return m.firstFrameTimeouts.Load() }

// OverBudget counts streams ended for sending more frames than their
// budget: a counter.
func (m *Monitor) OverBudget() uint64 { return m.overBudget.Load() }

// Handler returns the route and handler to mount on the shared mux.
func (m *Monitor) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{codecOptions()}, opts...)
	h := connect.NewBidiStreamHandler(loadmonitorv1connect.LoadMonitorServiceMonitorProcedure,
		func(ctx context.Context, st *connect.BidiStream[pb.RouterFrame, outFrame]) error {
			return m.serve(ctx, connectStream{st})
		}, opts...)
	return "/" + loadmonitorv1connect.LoadMonitorServiceName + "/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A call that came in through the native server is served on its
		// gRPC stream itself, past connect.
		if call := nativeCallFrom(r.Context()); call != nil && r.URL.Path == loadmonitorv1connect.LoadMonitorServiceMonitorProcedure {
			call.serveNative(r.Context(), func(ctx context.Context, st *nativeStream) error { return m.serve(ctx, st) })
			return
		}
		h.ServeHTTP(w, r)
	})
}

// stream is one Monitor stream, whichever way it came in.
type stream interface {
	Receive() (*pb.RouterFrame, error)
	Send(*outFrame) error
	// peerAddr is the router's address, host:port.
	peerAddr() string
}

// selfEnding is a stream that can end itself with a status, which wakes
// a read of it in progress: the native one, where no read deadline can
// (bridgeWriter.SetReadDeadline says why).
type selfEnding interface {
	// canEnd reports whether endWith works on this stream.
	canEnd() bool
	// endWith ends the stream with err's status (nil is OK) behind the
	// frames already sent, and fails a read in progress and every later
	// one. Only the first ending of the stream counts.
	endWith(err error)
	// ownsDone reports whether done is the stream's own context's: its
	// end wakes a read of the stream by itself.
	ownsDone(done <-chan struct{}) bool
}

// canWakeRead reports whether wakeRead works on st.
func canWakeRead(st stream, tr *transport) bool {
	if e, ok := st.(selfEnding); ok && e.canEnd() {
		return true
	}
	return tr.canInterruptRead()
}

// wakeRead makes the handler's read of st fail at once, and every later
// one: a native stream ends with result's status, the status the handler
// is about to return; any other is given a read deadline in the past,
// after which the handler can still send.
func wakeRead(st stream, tr *transport, result error) {
	if e, ok := st.(selfEnding); ok && e.canEnd() {
		e.endWith(result)
		return
	}
	tr.interruptRead()
}

// connectStream is a Monitor stream connect serves.
type connectStream struct {
	*connect.BidiStream[pb.RouterFrame, outFrame]
}

func (s connectStream) peerAddr() string { return s.Peer().Addr }

// serve runs one Monitor stream. Errors of the protocol are sent as a
// StreamError frame and the stream then ends with status OK (docs/routers.md).
// It keeps on its stack only what the stream's life needs: every open
// stream waits under it, so what registering takes lives in register.
func (m *Monitor) serve(ctx context.Context, st stream) error {
	tr := transportFrom(ctx)
	if tr == nil {
		m.warnNoTransport()
	}
	// At shutdown, a send in progress to a router that does not read is
	// bounded by BoundWritesAtShutdown, which covers every stream.
	if err := m.admit(st); err != nil {
		return err
	}
	r := m.newReceiver(st)
	defer m.release(r)
	w, sub, err := m.register(ctx, st, tr, r)
	if w == nil {
		return err
	}
	defer sub.Close()
	defer w.stall.Disarm()
	return m.relay(ctx, st, tr, r, w, sub)
}

func (m *Monitor) warnNoTransport() {
	m.noTransport.Do(func() {
		m.log.Warn("Monitor is mounted without rpc.WithTransportInfo: nothing bounds a send to a router that stops reading")
	})
}

// admit counts st among the streams waiting to register, or refuses it
// over --max-pending-streams. Refused with a status, not a StreamError
// frame: a status needs no flow-control window, so a flood that grants
// none cannot hold its refused streams either. Each waiting stream holds
// a goroutine and ~20 KB until FirstFrameTimeout: they must not add up.
// Out of serve's line, like register and awaitEnd: no inliner may fold
// their locals into the frame every open stream keeps.
//
//go:noinline
func (m *Monitor) admit(st stream) error {
	if n := m.pending.Add(1); n > int64(m.opts.MaxPendingStreams) {
		m.pending.Add(-1)
		err := domain.Errorf(domain.CodeResourceExhausted,
			"%d streams are waiting to register, the limit is %d (--max-pending-streams)", n-1, m.opts.MaxPendingStreams)
		m.noteEnd(st, "", err)
		return connectcode.ToConnect(err)
	}
	return nil
}

// register waits for the stream's register, registers its router and
// starts its writer, which sends the ack. It returns the writer and the
// session, or a nil writer and what the handler returns.
//
//go:noinline
func (m *Monitor) register(ctx context.Context, st stream, tr *transport, r *receiver) (*writer, RouterSession, error) {
	first, err := m.firstFrame(ctx, st, r)
	m.pending.Add(-1) // registered, or ending
	if first == nil {
		return nil, nil, m.endRead(st, tr, "", err)
	}
	reg := first.GetRegister()
	if reg == nil {
		return nil, nil, m.end(st, tr, "", domain.Errorf(domain.CodeInvalidFirstFrame,
			"the first frame must be register, got %s", frameKind(first)))
	}
	sub, cfg, err := m.reg.Register(reg.GetRouterId(), reg.GetReportIntervalMs(), reg.GetLeaseTtlMs())
	if err != nil {
		return nil, nil, m.end(st, tr, reg.GetRouterId(), err)
	}
	m.log.Debug("router registered", "router_id", sub.RouterID(),
		"interval", cfg.Interval, "lease", cfg.Lease, "peer", st.peerAddr())
	// The writer sends the ack, then the reports; attached now, it is
	// kicked once for the ack and what arrived meanwhile. A router that
	// does not read even the ack is bounded like any other once its
	// session ends.
	stall := m.opts.Stalls.Guard(ctx, loadmonitorv1connect.LoadMonitorServiceMonitorProcedure, st.peerAddr())
	w := newWriter(m, st, tr, sub.RouterID(), sub, newOutFrame(ackFrame(cfg)), stall)
	if a, ok := st.(asyncStream); ok {
		a.onWritten(w.written, w.kick)
	}
	sub.Notify(w.kick)
	w.kick()
	return w, sub, nil
}

// relay reads the router's frames in the handler's own goroutine until
// the stream ends, from either side. The writer wakes the read when it
// ended the stream (wakeRead): on net/http with a read deadline in the
// past, on grpc-go's server by writing the stream's status, which the
// handler then returns. Where nothing can (no WithTransportInfo on
// net/http, or a grpc-go whose stream has no WriteStatus), the read runs
// in a goroutine of its own, as a stream ends once its handler returns.
func (m *Monitor) relay(ctx context.Context, st stream, tr *transport, r *receiver, w *writer, sub RouterSession) error {
	var read chan error
	if canWakeRead(st, tr) {
		// The stream's deadline (grpc-timeout, connect-timeout-ms) or
		// cancellation wakes the read as the writer's end does; the
		// handler then returns the context's error, whose status a native
		// stream ends with. A native stream's own context wakes its read
		// itself (grpc-go's read watches it), and has ended the stream.
		if e, ok := st.(selfEnding); !ok || !e.ownsDone(ctx.Done()) {
			stop := context.AfterFunc(ctx, func() { wakeRead(st, tr, ctx.Err()) })
			defer stop()
		}
		err := r.relay(sub)
		read = make(chan error, 1) // made once the read ended: an open stream holds none
		read <- err
	} else {
		read = make(chan error, 1)
		go readAll(r, sub, read)
	}
	return m.awaitEnd(ctx, st, tr, w, sub, read)
}

// awaitEnd ends a stream once its read (on read) or its writer ended,
// whichever comes first, and returns the handler's result.
//
//go:noinline
func (m *Monitor) awaitEnd(ctx context.Context, st stream, tr *transport, w *writer, sub RouterSession, read chan error) error {
	for {
		select {
		case <-w.finishedChan(): // first: it is why a woken read failed
			w.close()
			return w.result
		default:
		}
		select {
		case <-w.finishedChan():
		case err := <-read:
			if errors.Is(err, io.EOF) {
				// Half-closed: the router can no longer renew, but the
				// session lives until its lease runs out (grpcurl with a
				// here-document works this way).
				read = nil
				continue
			}
			if !w.close() {
				return w.result
			}
			if ctx.Err() != nil { // the read was woken for it
				return ctx.Err()
			}
			if errors.Is(err, errOverBudget) {
				m.overBudget.Add(1)
				m.logAbuse(&m.budgetLog, "monitor stream ended: over its frame budget", st, err, "router_id", sub.RouterID())
			}
			// A router that sent stop or a bad frame right behind its
			// register still gets the ack first (docs/routers.md).
			if ackErr := w.sendAckLeft(); ackErr != nil {
				var de *domain.Error
				if errors.As(err, &de) { // its end cannot reach the router either, but counts
					m.noteEnd(st, sub.RouterID(), err)
				}
				return ackErr
			}
			return m.endRead(st, tr, sub.RouterID(), err)
		case <-ctx.Done():
			if !w.close() {
				// Ended by the writer: a native stream's status, once
				// written, ends its context too.
				return w.result
			}
			return ctx.Err()
		}
	}
}

func readAll(r *receiver, sub Controls, read chan<- error) { read <- r.relay(sub) }

// firstFrame waits for the stream's first frame. It returns the frame; or
// nil and nil for a stream closed before any frame; or the error that ends
// the stream: a *domain.Error for its last frame, or a status (no register
// in time, or the transport's).
func (m *Monitor) firstFrame(ctx context.Context, st stream, r *receiver) (*pb.RouterFrame, error) {
	timer := m.opts.Clock.NewTimer(m.opts.Clock.Now().Add(m.opts.FirstFrameTimeout))
	defer timer.Stop()
	select {
	case in := <-r.first():
		switch {
		case errors.Is(in.err, io.EOF):
			return nil, nil // closed before any frame
		case errors.Is(in.err, errRegisterDoesNotDecode):
			return nil, in.err // INVALID_ARGUMENT, as any bad register
		case domain.ErrorCode(in.err) == domain.CodeInvalidArgument:
			return nil, domain.Wrap(in.err, domain.CodeInvalidFirstFrame,
				"the first frame must be register: %s", domain.ErrorMessage(in.err))
		}
		return in.frame, in.err
	case <-timer.C():
		// A status, not an INVALID_FIRST_FRAME frame: there was no first
		// frame, and a register late on a lossy network is no router's
		// mistake. Routers take a status as a broken stream and open
		// another; some take INVALID_FIRST_FRAME as a refusal for good.
		cause := fmt.Errorf("no register within %s", m.opts.FirstFrameTimeout)
		m.firstFrameTimeouts.Add(1)
		m.logAbuse(&m.timeoutLog, "monitor stream ended: no register in time", st, cause)
		return nil, connect.NewError(connect.CodeDeadlineExceeded, cause)
	case <-m.reg.ShuttingDown().Done():
		return nil, domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// logAbuse writes one line for a stream ended for its own conduct, unless
// l held it back; each line says how many it stands for.
func (m *Monitor) logAbuse(l *loglimit.Limiter, msg string, st stream, err error, attrs ...any) {
	ok, suppressed := l.Allow(m.opts.Clock.Now())
	if !ok {
		return
	}
	m.log.Warn(msg, append(attrs, "peer", st.peerAddr(), "reason", logReason(err),
		"suppressed", suppressed, "log_interval", m.opts.AbuseLogInterval)...)
}

// logReason is why a stream ended, for the log: a domain error's message
// (what the router was told), else the error itself, which only the log
// sees.
func logReason(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Message
	}
	return domain.OneLine(err.Error())
}

// end sends err as the stream's last frame, within FinalWriteTimeout. A
// nil err ends cleanly.
func (m *Monitor) end(st stream, tr *transport, routerID string, err error) error {
	if err == nil {
		return nil
	}
	m.noteEnd(st, routerID, err)
	tr.setWriteDeadline(time.Now().Add(m.opts.FinalWriteTimeout))
	return st.Send(newOutFrame(errorFrame(err)))
}

// StreamErrors counts the streams Monitor ended, by the code of their
// StreamError frame (sent, or not deliverable to a router that stopped
// reading): why streams ended (lease expired, replaced, refused at
// --max-sessions, a bad frame), for a counter.
func (m *Monitor) StreamErrors() map[string]uint64 { return m.ends.snapshot() }

// noteEnd counts err's code and writes its line, held back per code to one
// per AbuseLogInterval: a router refused, replaced or gone is what an
// operator looks for first, and a fleet's worth of them must not flood the
// log. Endings that log themselves (over budget) and the
// shutdown's are only counted.
func (m *Monitor) noteEnd(st stream, routerID string, err error) {
	code := domain.ErrorCode(err)
	l := m.ends.add(code, m.opts.AbuseLogInterval)
	level, msg := slog.LevelWarn, "monitor stream ended: refused"
	switch {
	case code == domain.CodeShuttingDown, errors.Is(err, errOverBudget):
		m.log.Debug("monitor stream ended", "router_id", routerID, "code", code, "reason", logReason(err))
		return
	case code == domain.CodeLeaseExpired:
		level, msg = slog.LevelInfo, "monitor stream ended: no keep_alive within the lease"
	case code == domain.CodeReplaced:
		level, msg = slog.LevelInfo, "monitor stream ended: its router_id registered on another stream"
	case code == domain.CodeResourceExhausted:
		msg = "monitor register refused: a limit is reached" // the reason names it
	}
	ok, suppressed := l.Allow(m.opts.Clock.Now())
	if !ok {
		return
	}
	m.log.Log(context.Background(), level, msg, "router_id", routerID, "peer", st.peerAddr(), "code", code,
		"reason", logReason(err), "suppressed", suppressed, "log_interval", m.opts.AbuseLogInterval)
}

// endTally counts StreamError frames by code and holds a log limiter for
// each code.
type endTally struct {
	mu     sync.Mutex
	counts map[string]uint64
	logs   map[string]*loglimit.Limiter
}

func (t *endTally) add(code string, every time.Duration) *loglimit.Limiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts, t.logs = map[string]uint64{}, map[string]*loglimit.Limiter{}
	}
	t.counts[code]++
	l := t.logs[code]
	if l == nil {
		l = &loglimit.Limiter{Every: every}
		t.logs[code] = l
	}
	return l
}

func (t *endTally) snapshot() map[string]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}

// endRead ends the stream after its reader stopped: a *domain.Error goes
// to the router as the last frame; nil ends cleanly; anything else is the
// transport's (the router went away) and ends the stream with it.
func (m *Monitor) endRead(st stream, tr *transport, routerID string, err error) error {
	var de *domain.Error
	if !errors.As(err, &de) {
		return err
	}
	return m.end(st, tr, routerID, err)
}

func frameKind(f *pb.RouterFrame) string {
	switch f.GetPayload().(type) {
	case *pb.RouterFrame_UpdateConfig:
		return "update_config"
	case *pb.RouterFrame_KeepAlive:
		return "keep_alive"
	case *pb.RouterFrame_Stop:
		return "stop"
	case nil:
		return "an empty frame"
	}
	return fmt.Sprintf("%T", f.GetPayload())
}
