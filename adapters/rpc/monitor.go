package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// Registrar starts Monitor sessions: the one thing the Monitor handler asks
// of the core.
type Registrar interface {
	// Register validates a router's registration (SPEC §2.2) and starts its
	// session, replacing a live one with the same router_id. Its errors are
	// *domain.Error: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, SHUTTING_DOWN.
	Register(routerID string, intervalMs, leaseMs int64) (RouterSession, session.Config, error)
}

// RouterSession is one router's live session as the Monitor handler sees
// it; *fireloop.Subscription implements it.
type RouterSession interface {
	// RouterID is the router_id the session registered with.
	RouterID() string
	// Reports yields the session's latest undelivered report.
	Reports() <-chan *domain.Report
	// Done is closed when the session ended; Err then says why.
	Done() <-chan struct{}
	// Err is the *domain.Error that ended the session (LEASE_EXPIRED,
	// REPLACED, SHUTTING_DOWN, RESOURCE_EXHAUSTED), or nil.
	Err() error
	// KeepAlive renews the lease; an error means the session has ended.
	KeepAlive() error
	// Update applies an update_config as a whole; INVALID_ARGUMENT leaves
	// the session unchanged, any other error means it has ended.
	Update(intervalMs, leaseMs *int64) (session.Config, error)
	// Reregister applies a second register on the same stream like Update;
	// a different router_id is INVALID_ARGUMENT.
	Reregister(routerID string, intervalMs, leaseMs int64) (session.Config, error)
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

// Monitor serves sglang.router.loadmonitor.v1.LoadMonitorService/Monitor.
type Monitor struct {
	reg    Registrar
	log    *slog.Logger
	frames reportFrames
}

// NewMonitor returns the Monitor service over the fire loop.
func NewMonitor(loop *fireloop.Loop, log *slog.Logger) *Monitor {
	return newMonitor(loopRegistrar{loop}, log)
}

func newMonitor(reg Registrar, log *slog.Logger) *Monitor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{reg: reg, log: log}
}

// Handler returns the route and handler to mount on the shared mux.
func (m *Monitor) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{codecOptions()}, opts...)
	h := connect.NewBidiStreamHandler(loadmonitorv1connect.LoadMonitorServiceMonitorProcedure, m.serve, opts...)
	return "/" + loadmonitorv1connect.LoadMonitorServiceName + "/", h
}

type stream = connect.BidiStream[pb.RouterFrame, outFrame]

// serve runs one Monitor stream. Errors of the protocol are sent as a
// StreamError frame and the stream then ends with status OK (SPEC §2).
func (m *Monitor) serve(ctx context.Context, st *stream) error {
	first, err := st.Receive()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil // closed before any frame
		}
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return m.end(st, "", domain.Errorf(domain.CodeInvalidFirstFrame,
			"the first frame must be register, got %s", frameKind(first)))
	}
	sub, cfg, err := m.reg.Register(reg.GetRouterId(), reg.GetReportIntervalMs(), reg.GetLeaseTtlMs())
	if err != nil {
		return m.end(st, reg.GetRouterId(), err)
	}
	defer sub.Close()
	m.log.Debug("router registered", "router_id", sub.RouterID(),
		"interval", cfg.Interval, "lease", cfg.Lease, "peer", st.Peer().Addr)
	if err := st.Send(newOutFrame(ackFrame(cfg))); err != nil {
		return err
	}

	ended := make(chan error, 1) // the receiver's last word
	go receive(st, sub, ended)
	for {
		select {
		case rep := <-sub.Reports():
			if err := st.Send(m.frames.get(rep)); err != nil {
				return err
			}
		case <-sub.Done():
			return m.end(st, sub.RouterID(), sub.Err())
		case err := <-ended:
			var de *domain.Error
			if errors.As(err, &de) {
				return m.end(st, sub.RouterID(), err)
			}
			return err // nil: stop
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// receive reads the router's frames until stop, half-close, an invalid
// frame or a transport error, and reports all but half-close on ended.
func receive(st *stream, sub RouterSession, ended chan<- error) {
	for {
		f, err := st.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Half-closed: the router can no longer renew, but the
				// session lives until its lease runs out (grpcurl with a
				// here-document works this way).
				return
			}
			ended <- err
			return
		}
		switch p := f.GetPayload().(type) {
		case *pb.RouterFrame_KeepAlive:
			_ = sub.KeepAlive() // an ended session shows on Done
		case *pb.RouterFrame_UpdateConfig:
			if _, err := sub.Update(optionalInt(p.UpdateConfig.ReportIntervalMs), optionalInt(p.UpdateConfig.LeaseTtlMs)); isArgumentError(err) {
				ended <- err
				return
			}
		case *pb.RouterFrame_Register:
			r := p.Register
			if _, err := sub.Reregister(r.GetRouterId(), r.GetReportIntervalMs(), r.GetLeaseTtlMs()); isArgumentError(err) {
				ended <- err
				return
			}
		case *pb.RouterFrame_Stop:
			ended <- nil
			return
		default:
			ended <- domain.Errorf(domain.CodeInvalidArgument, "router frame has no payload")
			return
		}
	}
}

func optionalInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func isArgumentError(err error) bool { return domain.ErrorCode(err) == domain.CodeInvalidArgument }

// end sends err as the stream's last frame. A nil err ends cleanly.
func (m *Monitor) end(st *stream, routerID string, err error) error {
	if err == nil {
		return nil
	}
	m.log.Debug("monitor stream ended", "router_id", routerID, "code", domain.ErrorCode(err), "reason", domain.ErrorMessage(err))
	if sendErr := st.Send(newOutFrame(errorFrame(err))); sendErr != nil {
		return sendErr
	}
	return nil
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
