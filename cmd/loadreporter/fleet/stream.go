package fleet

import (
	"context"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/client"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// quietResend is how long a WatchFleet stream may go without a message
// before it gets an empty one: views drive the stream, but a page needs
// to tell a quiet fleet from a dead connection.
const quietResend = 10 * time.Second

// fleetStream serves loadreporter.v1.FleetService: each message is driven
// by the fleet's subscription (client.Fleet.Subscribe), never by a timer.
type fleetStream struct {
	fleet     *client.Fleet
	dashboard func(target string) string
	now       func() time.Time
	// stopping is closed when the server shuts down, ending every stream
	// (http.Server.Shutdown waits for handlers, and these never end alone).
	stopping <-chan struct{}
}

var _ loadreporterv1connect.FleetServiceHandler = (*fleetStream)(nil)

// handler is the route and handler to mount. WatchFleet's request is
// empty: a peer sending more than a few KiB (a gzip bomb) is refused
// before it is buffered.
func (s *fleetStream) handler() (string, http.Handler) {
	return loadreporterv1connect.NewFleetServiceHandler(s, connect.WithReadMaxBytes(maxRequestBytes))
}

// maxRequestBytes bounds one request message, as serve bounds its own.
const maxRequestBytes = 64 << 10

// WatchFleet sends the whole fleet, then what changed after each signal
// of the fleet's subscription, until the caller goes away, the server
// stops or the fleet is closed.
func (s *fleetStream) WatchFleet(ctx context.Context, _ *connect.Request[lrv1.WatchFleetRequest], st *connect.ServerStream[lrv1.WatchFleetResponse]) error {
	changed, cancel := s.fleet.Subscribe()
	defer cancel()
	var sent fleetSent
	quiet := time.NewTimer(quietResend)
	defer quiet.Stop()
	for {
		resend := false
		select {
		case _, open := <-changed:
			if !open {
				return nil
			}
		case <-quiet.C:
			resend = true
		case <-s.stopping:
			return nil
		case <-ctx.Done():
			return nil
		}
		msg, news := sent.next(s.now(), s.fleet.Views(), s.dashboard)
		if !news && !resend {
			continue
		}
		if err := st.Send(msg); err != nil {
			return err
		}
		quiet.Reset(quietResend)
	}
}

// fleetSent is what a stream has sent: each worker's view and the state
// it was shown in.
type fleetSent struct {
	views   map[string]*client.View
	states  map[string]client.State
	targets []string
}

// next is the message bringing the stream up to views at now; news says
// it holds anything the page has not seen.
func (f *fleetSent) next(now time.Time, views []*client.View, dashboard func(string) string) (*lrv1.WatchFleetResponse, bool) {
	first := f.views == nil
	if first {
		f.views, f.states = make(map[string]*client.View), make(map[string]client.State)
	}
	msg := &lrv1.WatchFleetResponse{ServerTimeUnixMs: now.UnixMilli(), Targets: make([]string, len(views))}
	for i, v := range views {
		msg.Targets[i] = v.Addr
		state := v.StateAt(now)
		if state == client.Fresh {
			msg.FreshWorkers++
		}
		if f.views[v.Addr] == v && f.states[v.Addr] == state {
			continue
		}
		f.views[v.Addr], f.states[v.Addr] = v, state
		msg.Workers = append(msg.Workers, workerToProto(v, state, dashboard(v.Addr)))
	}
	membership := !slices.Equal(msg.Targets, f.targets)
	if membership {
		for addr := range f.views {
			if !slices.Contains(msg.Targets, addr) {
				delete(f.views, addr)
				delete(f.states, addr)
			}
		}
	}
	f.targets = msg.Targets
	return msg, first || membership || len(msg.Workers) > 0
}

// workerToProto is v, shown in state, as the stream sends it.
func workerToProto(v *client.View, state client.State, dashboard string) *lrv1.FleetWorker {
	w := &lrv1.FleetWorker{Target: v.Addr, State: stateToProto(state), Report: v.Report, DashboardUrl: dashboard}
	if state != client.Fresh {
		w.Reason = notFreshReason(v)
	}
	if v.Report != nil {
		w.ReceivedUnixMs = v.ReceivedAt.UnixMilli()
	}
	return w
}

// notFreshReason is why v is not fresh, also when it has only aged past
// its StaleAt (the client republishes then, but the reason is ours until
// it does).
func notFreshReason(v *client.View) string {
	if v.Reason != "" {
		return v.Reason
	}
	return "no report since " + v.StaleAt.UTC().Format(time.RFC3339Nano)
}

func stateToProto(s client.State) lrv1.FleetWorkerState {
	switch s {
	case client.Disconnected:
		return lrv1.FleetWorkerState_FLEET_WORKER_STATE_DISCONNECTED
	case client.Unreachable:
		return lrv1.FleetWorkerState_FLEET_WORKER_STATE_UNREACHABLE
	case client.Stale:
		return lrv1.FleetWorkerState_FLEET_WORKER_STATE_STALE
	case client.Fresh:
		return lrv1.FleetWorkerState_FLEET_WORKER_STATE_FRESH
	}
	return lrv1.FleetWorkerState_FLEET_WORKER_STATE_UNSPECIFIED
}
