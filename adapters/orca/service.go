package orca

import (
	"context"
	"math"
	"net/http"
	"time"

	"connectrpc.com/connect"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
)

// ServiceName is the ORCA service, for gRPC health and reflection.
const ServiceName = "xds.service.orca.v3.OpenRcaService"

// Procedure is the one RPC served, and the route it is mounted on.
const Procedure = "/" + ServiceName + "/StreamCoreMetrics"

// DefaultInterval is the cadence of a stream whose request carries no
// report_interval (or 0 s).
const DefaultInterval = time.Second

// Core starts ORCA sessions: the one thing the handler asks of the core.
type Core interface {
	// Subscribe starts a session of kind ORCA, named name, reporting every
	// interval once clamped into the session limits; it returns the interval
	// granted. Its errors are *domain.Error: RESOURCE_EXHAUSTED (max-sessions
	// reached) and SHUTTING_DOWN.
	Subscribe(name string, interval time.Duration) (Stream, time.Duration, error)
}

// Stream is one ORCA session as the handler sees it;
// *fireloop.Subscription implements it.
type Stream interface {
	// Reports yields the session's latest undelivered report.
	Reports() <-chan *domain.Report
	// Done is closed when the session ended; Err then says why.
	Done() <-chan struct{}
	// Err is the *domain.Error that ended the session (SHUTTING_DOWN), or
	// nil after Close.
	Err() error
	// Close ends the session if it is still live.
	Close()
}

var _ Stream = (*fireloop.Subscription)(nil)

// loopCore adapts *fireloop.Loop, whose Subscribe takes a whole
// session.Options and returns the concrete subscription, to Core.
type loopCore struct{ loop *fireloop.Loop }

func (c loopCore) Subscribe(name string, interval time.Duration) (Stream, time.Duration, error) {
	granted := c.loop.Limits().ClampInterval(interval)
	sub, err := c.loop.Subscribe(session.Options{
		Kind: session.KindORCA, Name: name,
		Config: session.Config{Interval: granted}, NoLease: true,
	})
	if err != nil {
		return nil, 0, err // no typed nil inside the interface
	}
	return sub, granted, nil
}

// Options configure the ORCA service; the zero value is the defaults.
type Options struct {
	// DefaultInterval is the cadence of a stream that asks for none
	// (absent or 0 s report_interval); default 1 s. Like any requested
	// interval it is clamped into the session limits.
	DefaultInterval time.Duration
	// NominalRPS is sent as rps_fractional (default 1): the engine
	// publishes no request rate, and WRR ignores reports without one. It
	// may carry the worker's relative capacity (see the package doc).
	NominalRPS float64
}

func (o Options) withDefaults() (Options, error) {
	if o.DefaultInterval == 0 {
		o.DefaultInterval = DefaultInterval
	}
	if o.DefaultInterval < 0 {
		return o, domain.Errorf(domain.CodeInvalidArgument, "orca default interval must be > 0, got %s", o.DefaultInterval)
	}
	if o.NominalRPS == 0 {
		o.NominalRPS = 1
	}
	if !(o.NominalRPS > 0) || math.IsInf(o.NominalRPS, 1) {
		return o, domain.Errorf(domain.CodeInvalidArgument, "orca nominal rps must be a finite number > 0, got %v", o.NominalRPS)
	}
	return o, nil
}

// Service serves xds.service.orca.v3.OpenRcaService/StreamCoreMetrics.
type Service struct {
	core     Core
	interval time.Duration
	frames   *frames
}

// New returns the ORCA service over the fire loop; o's errors are
// INVALID_ARGUMENT naming the option.
func New(loop *fireloop.Loop, o Options) (*Service, error) {
	return newService(loopCore{loop}, o)
}

func newService(core Core, o Options) (*Service, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Service{core: core, interval: o.DefaultInterval, frames: newFrames(o.NominalRPS)}, nil
}

// Handler returns the route and handler to mount on the shared mux. It
// answers gRPC, gRPC-Web and Connect clients.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	method := v3orcaservicepb.File_xds_service_orca_v3_orca_proto.Services().
		ByName("OpenRcaService").Methods().ByName("StreamCoreMetrics")
	opts = append([]connect.HandlerOption{codecOptions(), connect.WithSchema(method)}, opts...)
	return Procedure, connect.NewServerStreamHandler(Procedure, s.stream, opts...)
}

// stream runs one StreamCoreMetrics call: one OrcaLoadReport per due
// deadline until the client goes away or the reporter shuts down.
func (s *Service) stream(ctx context.Context, req *connect.Request[v3orcaservicepb.OrcaLoadReportRequest],
	st *connect.ServerStream[frame]) error {
	interval, err := s.requested(req.Msg.GetReportInterval())
	if err != nil {
		return connectcode.ToConnect(err)
	}
	sub, _, err := s.core.Subscribe("orca "+req.Peer().Addr, interval)
	if err != nil {
		return connectcode.ToConnect(err)
	}
	defer sub.Close()
	for {
		select {
		case rep := <-sub.Reports():
			if err := st.Send(s.frames.Get(rep)); err != nil {
				return err
			}
		case <-sub.Done():
			return connectcode.ToConnect(sub.Err())
		case <-ctx.Done():
			return nil
		}
	}
}

// requested is the interval a request asks for, before the core clamps
// it: the default when absent or 0 s, a malformed Duration refused.
func (s *Service) requested(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return s.interval, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, domain.Errorf(domain.CodeInvalidArgument, "report_interval is not a valid duration: %v", err)
	}
	if iv := d.AsDuration(); iv != 0 {
		return iv, nil
	}
	return s.interval, nil
}
