package fleet

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/client"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func dashboardOf(target string) string { return "http://" + target + "/" }

func freshView(addr string, seq uint64, at time.Time) *client.View {
	return &client.View{Addr: addr, State: client.Fresh, ReceivedAt: at, StaleAt: at.Add(3 * time.Second),
		Report: &pb.LoadReport{SourceInstanceId: "i", SequenceId: seq, Status: pb.ReportStatus_REPORT_STATUS_HEALTHY,
			Ranks: []*pb.RankLoad{{DpRank: 0, TokenUsage: 0.25}, {DpRank: 1, TokenUsage: 1.5}}}}
}

// entries are views with nothing pending.
func entries(vs ...*client.View) []client.Standing {
	es := make([]client.Standing, len(vs))
	for i, v := range vs {
		es[i] = client.Standing{View: v}
	}
	return es
}

func targetsOf(ws []*lrv1.FleetWorker) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.GetTarget())
	}
	return out
}

// A stream sends the whole fleet first (even an empty one), then only the
// workers whose view or state changed: nothing for views it has sent, a
// new view, a Fresh view that aged past its StaleAt, a worker removed.
func TestFleetSentSendsWhatChanged(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var empty fleetSent
	if msg, news := empty.next(now, nil, dashboardOf); !news || len(msg.GetWorkers()) != 0 || len(msg.GetTargets()) != 0 {
		t.Fatalf("an empty fleet's first message: %v %v", msg, news)
	}

	a, b := freshView("a:1", 7, now.Add(-100*time.Millisecond)), freshView("b:1", 3, now.Add(-200*time.Millisecond))
	c := &client.View{Addr: "c:1", State: client.Disconnected, Reason: "no registered stream: connection refused"}
	var s fleetSent
	msg, news := s.next(now, entries(a, b, c), dashboardOf)
	if !news || !slices.Equal(targetsOf(msg.GetWorkers()), []string{"a:1", "b:1", "c:1"}) ||
		!slices.Equal(msg.GetTargets(), []string{"a:1", "b:1", "c:1"}) || msg.GetFreshWorkers() != 2 ||
		msg.GetServerTimeUnixMs() != now.UnixMilli() {
		t.Fatalf("first message: %v", msg)
	}
	wa, wc := msg.GetWorkers()[0], msg.GetWorkers()[2]
	if wa.GetState() != lrv1.FleetWorkerState_FLEET_WORKER_STATE_FRESH || wa.GetReason() != "" || wa.GetReport() != a.Report ||
		wa.GetReceivedUnixMs() != a.ReceivedAt.UnixMilli() || wa.GetDashboardUrl() != "http://a:1/" {
		t.Fatalf("fresh worker: %v", wa)
	}
	if wc.GetState() != lrv1.FleetWorkerState_FLEET_WORKER_STATE_DISCONNECTED || wc.GetReason() != c.Reason ||
		wc.GetReport() != nil || wc.GetReceivedUnixMs() != 0 {
		t.Fatalf("disconnected worker: %v", wc)
	}

	if msg, news := s.next(now.Add(time.Second), entries(a, b, c), dashboardOf); news || len(msg.GetWorkers()) != 0 {
		t.Fatalf("nothing changed, yet: %v", msg)
	}
	b2 := freshView("b:1", 4, now.Add(time.Second))
	if msg, news := s.next(now.Add(time.Second), entries(a, b2, c), dashboardOf); !news ||
		!slices.Equal(targetsOf(msg.GetWorkers()), []string{"b:1"}) || msg.GetWorkers()[0].GetReport().GetSequenceId() != 4 {
		t.Fatalf("b's new report: %v", msg)
	}
	later := a.StaleAt.Add(time.Millisecond)
	msg, news = s.next(later, entries(a, b2, c), dashboardOf)
	if !news || !slices.Equal(targetsOf(msg.GetWorkers()), []string{"a:1"}) || msg.GetFreshWorkers() != 1 ||
		msg.GetWorkers()[0].GetState() != lrv1.FleetWorkerState_FLEET_WORKER_STATE_STALE ||
		!strings.HasPrefix(msg.GetWorkers()[0].GetReason(), "no report since ") {
		t.Fatalf("a aged past StaleAt: %v", msg)
	}
	msg, news = s.next(later, entries(a, c), dashboardOf)
	if !news || len(msg.GetWorkers()) != 0 || !slices.Equal(msg.GetTargets(), []string{"a:1", "c:1"}) {
		t.Fatalf("b removed: %v", msg)
	}
	if msg, news := s.next(later, entries(a, b2, c), dashboardOf); !news || !slices.Equal(targetsOf(msg.GetWorkers()), []string{"b:1"}) {
		t.Fatalf("b added back is sent again: %v", msg)
	}
}

// A worker whose pending dispatches changed is sent again with them, its
// view unchanged; every message carries the aggregate, over the Fresh
// workers' ranks and every worker's pending dispatches.
func TestFleetSentSendsPendingAndAggregate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a, b := freshView("a:1", 7, now), freshView("b:1", 3, now)
	c := &client.View{Addr: "c:1", State: client.Disconnected, Reason: "no registered stream"}
	es := entries(a, b, c)
	var s fleetSent
	msg, _ := s.next(now, es, dashboardOf)
	if ag := msg.GetAggregate(); ag.GetDpRankCount() != 4 || ag.GetAvgTokenUsage() != 0.875 || ag.GetPendingRequests() != 0 {
		t.Fatalf("first aggregate: %v", ag)
	}
	es[0].Pending = client.Pending{Requests: 2, Tokens: 900}
	es[2].Pending = client.Pending{Requests: 1, Tokens: 100}
	msg, news := s.next(now, es, dashboardOf)
	if !news || !slices.Equal(targetsOf(msg.GetWorkers()), []string{"a:1", "c:1"}) ||
		msg.GetWorkers()[0].GetPendingRequests() != 2 || msg.GetWorkers()[0].GetPendingTokens() != 900 {
		t.Fatalf("pending changed: %v", msg)
	}
	if ag := msg.GetAggregate(); ag.GetPendingRequests() != 3 || ag.GetPendingTokens() != 1000 || ag.GetDpRankCount() != 4 {
		t.Fatalf("aggregate with pending: %v", ag)
	}
	if msg, news := s.next(now, es, dashboardOf); news || msg.GetAggregate().GetPendingRequests() != 3 {
		t.Fatalf("nothing changed: %v %v", news, msg)
	}
	a2 := answerOf(now, es, dashboardOf)
	if a2.Aggregate.PendingRequests != 3 || a2.Workers[0].Pending != (Pending{Requests: 2, Tokens: 900}) || a2.Aggregate.FreshWorkers != 2 {
		t.Fatalf("answer: %+v", a2)
	}
}
