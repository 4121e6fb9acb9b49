package rpc

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
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

// Admin serves loadreporter.v1.AdminService.
type Admin struct {
	sim      SimControl // nil unless the source is the simulator
	topology Topology
}

var _ loadreporterv1connect.AdminServiceHandler = (*Admin)(nil)

// NewAdmin returns the admin service; sim may be nil.
func NewAdmin(sim SimControl, topology Topology) *Admin {
	return &Admin{sim: sim, topology: topology}
}

// Handler returns the route and handler to mount on the shared mux.
func (a *Admin) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{codecOptions()}, opts...)
	return loadreporterv1connect.NewAdminServiceHandler(a, opts...)
}

// SetSimMode switches the simulator's mode.
func (a *Admin) SetSimMode(_ context.Context, req *connect.Request[lrv1.SetSimModeRequest]) (*connect.Response[lrv1.SetSimModeResponse], error) {
	if a.sim == nil {
		return nil, toConnectError(domain.Errorf(domain.CodeFailedPrecondition,
			"the simulated engine is not in use (start with --source sim)"))
	}
	if err := a.sim.SetMode(req.Msg.GetMode()); err != nil {
		return nil, toConnectError(err)
	}
	mode, ranks := a.sim.State()
	return connect.NewResponse(&lrv1.SetSimModeResponse{Mode: mode, Ranks: int32(ranks)}), nil
}

// SetTopology replaces the expected rank set without pulling.
func (a *Admin) SetTopology(_ context.Context, req *connect.Request[lrv1.SetTopologyRequest]) (*connect.Response[lrv1.SetTopologyResponse], error) {
	n := req.Msg.GetDpSize()
	if n < 0 || n > 1<<16 {
		return nil, toConnectError(domain.Errorf(domain.CodeInvalidArgument,
			"dp_size %d: want 0 (learn from the next valid snapshot) to 65536", n))
	}
	a.topology.SetExpectedRanks(domain.RankRange(int(n)))
	resp := &lrv1.SetTopologyResponse{}
	for _, r := range a.topology.ExpectedRanks().Ranks() {
		resp.ExpectedRanks = append(resp.ExpectedRanks, int32(r))
	}
	return connect.NewResponse(resp), nil
}
