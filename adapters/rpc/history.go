package rpc

import (
	"context"
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/ports"
)

// History serves loadreporter.v1.HistoryService over a ports.HistoryQuery.
type History struct {
	query           ports.HistoryQuery
	now             func() time.Time
	historyInterval time.Duration
	queryTimeout    time.Duration // bounds each call, whatever deadline the caller sent
}

// DefaultHistoryQueryTimeout bounds one history call, as the pages bound
// theirs: a caller with no deadline must not hold the store's few
// connections, which the history writer needs, for as long as a slow
// query runs.
const DefaultHistoryQueryTimeout = 15 * time.Second

var _ loadreporterv1connect.HistoryServiceHandler = (*History)(nil)

// NewHistory returns the history service. historyInterval is what ListGaps
// uses when a request names none.
func NewHistory(q ports.HistoryQuery, now func() time.Time, historyInterval time.Duration) *History {
	return &History{query: q, now: now, historyInterval: historyInterval, queryTimeout: DefaultHistoryQueryTimeout}
}

// Handler returns the route and handler to mount on the shared mux.
func (h *History) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{codecOptions(), connect.WithInterceptors(boundCalls(h.queryTimeout))}, opts...)
	return loadreporterv1connect.NewHistoryServiceHandler(h, opts...)
}

// boundCalls ends every unary call's context after d at the latest.
func boundCalls(d time.Duration) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, req)
		}
	})
}

// window reads a request's window; a missing start is named by the
// request's own field, which the query's message ("since") is not.
func (h *History) window(w *lrv1.Window) (audit.Window, error) {
	var out audit.Window
	if w.GetSinceUnixMs() == 0 {
		return out, connect.NewError(connect.CodeInvalidArgument, errors.New(
			"window.since_unix_ms is required (JSON: window.sinceUnixMs), in milliseconds since the Unix epoch; window.until_unix_ms defaults to now"))
	}
	out.Since = time.UnixMilli(w.GetSinceUnixMs())
	if w.GetUntilUnixMs() != 0 {
		out.Until = time.UnixMilli(w.GetUntilUnixMs())
	} else {
		out.Until = h.now()
	}
	return out, nil
}

func ranks64(rs []int32) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = int64(r)
	}
	return out
}

func statusesOf(ss []pb.ReportStatus) []domain.Status {
	out := make([]domain.Status, len(ss))
	for i, s := range ss {
		out[i] = domain.Status(s)
	}
	return out
}

func statusesToProto(ss []domain.Status) []pb.ReportStatus {
	out := make([]pb.ReportStatus, len(ss))
	for i, s := range ss {
		out[i] = pb.ReportStatus(s)
	}
	return out
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ListReports pages through recorded reports.
func (h *History) ListReports(ctx context.Context, req *connect.Request[lrv1.ListReportsRequest]) (*connect.Response[lrv1.ListReportsResponse], error) {
	m := req.Msg
	window, err := h.window(m.GetWindow())
	if err != nil {
		return nil, err
	}
	page, err := h.query.Reports(ctx, audit.ReportsQuery{
		Window: window, Workers: m.GetWorkers(), Statuses: statusesOf(m.GetStatuses()),
		Ranks: ranks64(m.GetRanks()), Limit: int(m.GetLimit()), Cursor: m.GetCursor(), Descending: m.GetDescending(),
	})
	if err != nil {
		return nil, connectcode.ToConnect(err)
	}
	out := &lrv1.ListReportsResponse{NextCursor: page.NextCursor, Reports: make([]*pb.LoadReport, len(page.Reports))}
	for i, r := range page.Reports {
		out.Reports[i] = ReportToProto(r)
	}
	return connect.NewResponse(out), nil
}

// ListOutages returns maximal runs of non-HEALTHY reports.
func (h *History) ListOutages(ctx context.Context, req *connect.Request[lrv1.ListOutagesRequest]) (*connect.Response[lrv1.ListOutagesResponse], error) {
	m := req.Msg
	window, err := h.window(m.GetWindow())
	if err != nil {
		return nil, err
	}
	res, err := h.query.Outages(ctx, audit.OutagesQuery{Window: window, Workers: m.GetWorkers(), Limit: int(m.GetLimit())})
	if err != nil {
		return nil, connectcode.ToConnect(err)
	}
	out := &lrv1.ListOutagesResponse{Truncated: res.Truncated}
	for _, o := range res.Outages {
		out.Outages = append(out.Outages, &lrv1.Outage{
			WorkerAddr: o.WorkerAddr, StartUnixMs: unixMs(o.Start), EndUnixMs: unixMs(o.End), Ongoing: o.Ongoing,
			LastSeenUnixMs: unixMs(o.LastSeen), DurationMs: o.Duration.Milliseconds(),
			Statuses: statusesToProto(o.Statuses), LastError: o.LastError, Reports: o.Reports,
		})
	}
	return connect.NewResponse(out), nil
}

// GetRankStats summarises each rank over the window.
func (h *History) GetRankStats(ctx context.Context, req *connect.Request[lrv1.GetRankStatsRequest]) (*connect.Response[lrv1.GetRankStatsResponse], error) {
	m := req.Msg
	window, err := h.window(m.GetWindow())
	if err != nil {
		return nil, err
	}
	res, err := h.query.RankStats(ctx, audit.RankStatsQuery{Window: window, Workers: m.GetWorkers(),
		Ranks: ranks64(m.GetRanks()), Limit: int(m.GetLimit())})
	if err != nil {
		return nil, connectcode.ToConnect(err)
	}
	out := &lrv1.GetRankStatsResponse{Truncated: res.Truncated}
	for _, s := range res.Stats {
		out.Stats = append(out.Stats, &lrv1.RankStat{
			WorkerAddr: s.WorkerAddr, DpRank: int32(s.DPRank), Reports: s.Reports,
			AvgTokenUsage: s.AvgTokenUsage, MaxTokenUsage: s.MaxTokenUsage, P95TokenUsage: s.P95TokenUsage,
			MaxWaitingReqs: s.MaxWaitingReqs, MeanGenThroughput: s.MeanGenThroughput,
		})
	}
	return connect.NewResponse(out), nil
}

// ListGaps returns recording gaps and restarts.
func (h *History) ListGaps(ctx context.Context, req *connect.Request[lrv1.ListGapsRequest]) (*connect.Response[lrv1.ListGapsResponse], error) {
	m := req.Msg
	interval := h.historyInterval
	if ms := m.GetIntervalMs(); ms != 0 {
		// Checked before it is multiplied: a huge value must not wrap
		// into an interval the query accepts.
		if ms < 0 || ms > audit.MaxGapInterval.Milliseconds() {
			return nil, connectcode.ToConnect(domain.Errorf(domain.CodeInvalidArgument,
				"interval_ms must be within [1, %d] (the history interval; 0: the reporter's own), got %d", audit.MaxGapInterval.Milliseconds(), ms))
		}
		interval = time.Duration(ms) * time.Millisecond
	}
	window, err := h.window(m.GetWindow())
	if err != nil {
		return nil, err
	}
	res, err := h.query.Gaps(ctx, audit.GapsQuery{Window: window, Workers: m.GetWorkers(),
		Interval: interval, Limit: int(m.GetLimit())})
	if err != nil {
		return nil, connectcode.ToConnect(err)
	}
	out := &lrv1.ListGapsResponse{Truncated: res.Truncated}
	for _, g := range res.Gaps {
		out.Gaps = append(out.Gaps, &lrv1.Gap{WorkerAddr: g.WorkerAddr, StartUnixMs: unixMs(g.Start),
			EndUnixMs: unixMs(g.End), DurationMs: g.Duration.Milliseconds()})
	}
	for _, r := range res.Restarts {
		out.Restarts = append(out.Restarts, &lrv1.Restart{WorkerAddr: r.WorkerAddr, SourceInstanceId: r.SourceInstanceID,
			FirstUnixMs: unixMs(r.FirstTime), PreviousSourceInstanceId: r.PreviousSourceInstanceID,
			PreviousLastUnixMs: unixMs(r.PreviousLastTime)})
	}
	return connect.NewResponse(out), nil
}

// ListImbalance returns spans of uneven token usage across ranks.
func (h *History) ListImbalance(ctx context.Context, req *connect.Request[lrv1.ListImbalanceRequest]) (*connect.Response[lrv1.ListImbalanceResponse], error) {
	m := req.Msg
	window, err := h.window(m.GetWindow())
	if err != nil {
		return nil, err
	}
	res, err := h.query.Imbalance(ctx, audit.ImbalanceQuery{Window: window, Workers: m.GetWorkers(),
		Threshold: m.GetThreshold(), Limit: int(m.GetLimit())})
	if err != nil {
		return nil, connectcode.ToConnect(err)
	}
	out := &lrv1.ListImbalanceResponse{Truncated: res.Truncated}
	for _, s := range res.Spans {
		out.Spans = append(out.Spans, &lrv1.ImbalanceSpan{
			WorkerAddr: s.WorkerAddr, StartUnixMs: unixMs(s.Start), EndUnixMs: unixMs(s.End), Ongoing: s.Ongoing,
			LastSeenUnixMs: unixMs(s.LastSeen), DurationMs: s.Duration.Milliseconds(), PeakSpread: s.PeakSpread,
			PeakUnixMs: unixMs(s.PeakTime), Reports: s.Reports,
		})
	}
	return connect.NewResponse(out), nil
}
