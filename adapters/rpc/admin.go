package rpc

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	"github.com/loadreporter/loadreporter/internal/loglimit"
)

// SimControl switches the simulated engine's failure modes.
type SimControl interface {
	SetMode(spec string) error
	State() (mode string, ranks int)
}

// Topology holds the expected rank set; *fireloop.Loop implements it.
type Topology interface {
	ExpectedRanks() domain.RankSet
	SetExpectedRanks(domain.RankSet)
}

// DefaultMaxDPSize bounds SetTopology's dp_size unless AdminOptions says
// otherwise.
const DefaultMaxDPSize = 1024

// maxMaxDPSize is the largest expected rank set anything accepts (--dp-size
// too): no report holds more ranks.
const maxMaxDPSize = domain.MaxRanks

// AdminOptions configure AdminService. The zero value is the defaults.
type AdminOptions struct {
	// Token, when set, is the bearer token AdminService requires
	// ("Authorization: Bearer <Token>"): a call without a token is
	// UNAUTHENTICATED, one with any other token (a router's) is
	// PERMISSION_DENIED, so the tokens routers hold cannot change the
	// topology or the engine.
	Token string
	// MaxDPSize bounds SetTopology's dp_size (default 1024, at most domain.MaxRanks).
	MaxDPSize int
	// Logger receives one Info line per call: who (peer, client
	// certificate), what (method, arguments), and how it ended. Refused
	// calls share one line per DeniedLogInterval.
	Logger *slog.Logger
	// DeniedLogInterval is the least time between two lines about refused
	// calls (default 10 s).
	DeniedLogInterval time.Duration
}

// Admin serves loadreporter.v1.AdminService.
type Admin struct {
	sim       SimControl // nil unless the source is the simulator
	topology  Topology
	opts      AdminOptions
	deniedLog loglimit.Limiter
}

var _ loadreporterv1connect.AdminServiceHandler = (*Admin)(nil)

// NewAdminWithOptions returns the admin service; sim may be nil. o's
// errors are INVALID_ARGUMENT naming the option.
func NewAdminWithOptions(sim SimControl, topology Topology, o AdminOptions) (*Admin, error) {
	if o.MaxDPSize < 0 || o.MaxDPSize > maxMaxDPSize {
		return nil, domain.InvalidOption("max-dp-size", "%d: want 1 to %d (0 takes the default %d)",
			o.MaxDPSize, maxMaxDPSize, DefaultMaxDPSize)
	}
	if o.DeniedLogInterval < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "the admin denied-log interval must be > 0 (0 takes the default)")
	}
	o.MaxDPSize = cmp.Or(o.MaxDPSize, DefaultMaxDPSize)
	o.DeniedLogInterval = cmp.Or(o.DeniedLogInterval, DefaultAbuseLogInterval)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Admin{sim: sim, topology: topology, opts: o}
	a.deniedLog.Every = o.DeniedLogInterval
	return a, nil
}

// Handler returns the route and handler to mount on the shared mux.
func (a *Admin) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{codecOptions(), connect.WithInterceptors(connect.UnaryInterceptorFunc(a.guard))}, opts...)
	return loadreporterv1connect.NewAdminServiceHandler(a, opts...)
}

// SetSimMode switches the simulator's mode.
func (a *Admin) SetSimMode(_ context.Context, req *connect.Request[lrv1.SetSimModeRequest]) (*connect.Response[lrv1.SetSimModeResponse], error) {
	if a.sim == nil {
		return nil, connectcode.ToConnect(domain.Errorf(domain.CodeFailedPrecondition,
			"the simulated engine is not in use (start with --source sim)"))
	}
	if err := a.sim.SetMode(req.Msg.GetMode()); err != nil {
		return nil, connectcode.ToConnect(err)
	}
	mode, ranks := a.sim.State()
	return connect.NewResponse(&lrv1.SetSimModeResponse{Mode: mode, Ranks: int32(ranks)}), nil
}

// SetTopology replaces the expected rank set without pulling.
func (a *Admin) SetTopology(_ context.Context, req *connect.Request[lrv1.SetTopologyRequest]) (*connect.Response[lrv1.SetTopologyResponse], error) {
	n := req.Msg.GetDpSize()
	if n < 0 || int(n) > a.opts.MaxDPSize {
		return nil, connectcode.ToConnect(domain.Errorf(domain.CodeInvalidArgument,
			"dp_size %d: want 0 (learn from the next valid snapshot) to %d (--max-dp-size)", n, a.opts.MaxDPSize))
	}
	a.topology.SetExpectedRanks(domain.RankRange(int(n)))
	resp := &lrv1.SetTopologyResponse{}
	for _, r := range a.topology.ExpectedRanks().Ranks() {
		resp.ExpectedRanks = append(resp.ExpectedRanks, int32(r))
	}
	return connect.NewResponse(resp), nil
}
