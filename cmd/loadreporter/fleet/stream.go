package fleet

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/serving"
	"github.com/loadreporter/loadreporter/domain"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// quietResend is how long a WatchFleet stream may go without a message
// before it gets an empty one: views drive the stream, but a page needs
// to tell a quiet fleet from a dead connection.
const quietResend = 10 * time.Second

// pendingEvery is how often a stream looks at the pending dispatches:
// they change with every pick of the fleet's router, which nothing
// signals, so a page sees them at most this late.
const pendingEvery = time.Second

// fleetStream serves loadreporter.v1.FleetService: each message is driven
// by the fleet's subscription (client.Fleet.Subscribe), or by the pending
// dispatches changing, looked at every pendingEvery.
type fleetStream struct {
	fleet     *client.Fleet
	dashboard func(target string) string
	now       func() time.Time
	// stopping is closed when the fleet view shuts down, ending every
	// stream (http.Server.Shutdown waits for handlers, and these never end
	// alone).
	stopping <-chan struct{}
	// streams bounds the live streams (--max-watch-sessions).
	streams *gate
	// sending counts the streams inside a Send: at shutdown, those whose
	// reader stopped reading are still there.
	sending atomic.Int64
}

var _ loadreporterv1connect.FleetServiceHandler = (*fleetStream)(nil)

// handler is the route and handler to mount. WatchFleet's request is
// empty: a peer sending more than serve accepts of any message (a gzip
// bomb) is refused before it is buffered.
func (s *fleetStream) handler() (string, http.Handler) {
	return loadreporterv1connect.NewFleetServiceHandler(s, connect.WithReadMaxBytes(serving.MaxRequestBytes))
}

// WatchFleet sends the whole fleet, then what changed after each signal
// of the fleet's subscription, until the caller goes away, the server
// stops or the fleet is closed. Past --max-watch-sessions live streams it
// refuses at once with RESOURCE_EXHAUSTED, before it holds anything.
func (s *fleetStream) WatchFleet(ctx context.Context, _ *connect.Request[lrv1.WatchFleetRequest], st *connect.ServerStream[lrv1.WatchFleetResponse]) error {
	if live, ok := s.streams.enter(); !ok {
		return connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%d WatchFleet streams are live, the limit is %d (--max-watch-sessions)", live, s.streams.max))
	}
	defer s.streams.leave()
	changed, cancel := s.fleet.Subscribe()
	defer cancel()
	var sent fleetSent
	tick := time.NewTicker(pendingEvery)
	defer tick.Stop()
	lastSend := s.now()
	for {
		select {
		case _, open := <-changed:
			if !open {
				return nil
			}
		case <-tick.C:
		case <-s.stopping:
			return nil
		case <-ctx.Done():
			return nil
		}
		now := s.now()
		msg, news := sent.next(now, s.fleet.Standings(), s.dashboard)
		if !news && now.Sub(lastSend) < quietResend {
			continue
		}
		s.sending.Add(1)
		err := st.Send(msg)
		s.sending.Add(-1)
		if err != nil {
			return err
		}
		lastSend = now
	}
}

// gate counts live streams up to max.
type gate struct {
	max  int64
	live atomic.Int64
}

func newGate(max int) *gate { return &gate{max: int64(max)} }

// enter takes a slot; false, with how many are live, when none is free.
func (g *gate) enter() (int64, bool) {
	if n := g.live.Add(1); n > g.max {
		g.live.Add(-1)
		return n - 1, false
	}
	return 0, true
}

// leave gives back the slot enter took.
func (g *gate) leave() { g.live.Add(-1) }

// count is how many streams are live.
func (g *gate) count() int64 { return g.live.Load() }

// fleetSent is what a stream has sent: each worker's view, the state it
// was shown in and its pending dispatches then.
type fleetSent struct {
	shown   map[string]shownWorker
	targets []string
}

type shownWorker struct {
	view    *client.View
	state   client.State
	pending client.Pending
}

// next is the message bringing the stream up to es at now; news says it
// holds anything the page has not seen.
func (f *fleetSent) next(now time.Time, es []client.Standing, dashboard func(string) string) (*lrv1.WatchFleetResponse, bool) {
	first := f.shown == nil
	if first {
		f.shown = make(map[string]shownWorker)
	}
	msg := &lrv1.WatchFleetResponse{ServerTimeUnixMs: now.UnixMilli(), Targets: make([]string, len(es))}
	for i, e := range es {
		v := e.View
		msg.Targets[i] = v.Addr
		state := v.StateAt(now)
		if state == client.Fresh {
			msg.FreshWorkers++
		}
		shown := shownWorker{view: v, state: state, pending: e.Pending}
		if f.shown[v.Addr] == shown {
			continue
		}
		f.shown[v.Addr] = shown
		msg.Workers = append(msg.Workers, workerToProto(e, state, dashboard(v.Addr)))
	}
	membership := !slices.Equal(msg.Targets, f.targets)
	if membership {
		for addr := range f.shown {
			if !slices.Contains(msg.Targets, addr) {
				delete(f.shown, addr)
			}
		}
	}
	f.targets = msg.Targets
	msg.Aggregate = aggregateToProto(aggregateOf(now, es, func(i int) *domain.Report {
		if es[i].View.Report == nil {
			return nil
		}
		return rpc.ReportFromProto(es[i].View.Report)
	}))
	return msg, first || membership || len(msg.Workers) > 0
}

// workerToProto is e, shown in state, as the stream sends it.
func workerToProto(e client.Standing, state client.State, dashboard string) *lrv1.FleetWorker {
	v := e.View
	w := &lrv1.FleetWorker{Target: v.Addr, State: stateToProto(state), Report: v.Report, DashboardUrl: dashboard,
		PendingRequests: e.Pending.Requests, PendingTokens: e.Pending.Tokens}
	if state != client.Fresh {
		w.Reason = notFreshReason(v)
	}
	if v.Report != nil {
		w.ReceivedUnixMs = v.ReceivedAt.UnixMilli()
	}
	return w
}

func aggregateToProto(a Aggregate) *lrv1.FleetAggregate {
	return &lrv1.FleetAggregate{
		DpRankCount: int32(a.DPRankCount), TotalRunningReqs: int64(a.TotalRunningReqs), TotalWaitingReqs: int64(a.TotalWaitingReqs),
		TotalUsedTokens: int64(a.TotalUsedTokens), TotalTokens: int64(a.TotalTokens), AvgTokenUsage: a.AvgTokenUsage,
		AvgThroughput: a.AvgThroughput, AvgUtilization: a.AvgUtilization,
		PendingRequests: a.PendingRequests, PendingTokens: a.PendingTokens,
	}
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
