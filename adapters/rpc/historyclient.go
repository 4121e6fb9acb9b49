package rpc

import (
	"context"
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

// HistoryClient is ports.HistoryQuery over a remote HistoryService, so the
// audit CLI asks a running reporter exactly what its dashboard asks.
type HistoryClient struct {
	client loadreporterv1connect.HistoryServiceClient
	token  string
}

var _ ports.HistoryQuery = (*HistoryClient)(nil)

// NewHistoryClient dials baseURL (http://host:port) with c.
func NewHistoryClient(c *http.Client, baseURL, authToken string) *HistoryClient {
	return &HistoryClient{client: loadreporterv1connect.NewHistoryServiceClient(c, baseURL), token: authToken}
}

func request[T any](h *HistoryClient, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if h.token != "" {
		req.Header().Set("Authorization", "Bearer "+h.token)
	}
	return req
}

func windowToProto(w audit.Window) *lrv1.Window {
	return &lrv1.Window{SinceUnixMs: unixMs(w.Since), UntilUnixMs: unixMs(w.Until)}
}

// carried checks what the wire cannot carry as given, so it is refused
// here rather than answered differently than the store would: a window
// bound finer than the millisecond (stored times are microseconds), the
// Unix epoch itself (0 means unset), and, with the domain's own messages,
// the limit and ranks it carries in 32 bits (4294967297 would arrive as 1).
func carried(w audit.Window, limit, def int, ranks []int64) error {
	for _, b := range []struct {
		name string
		t    time.Time
	}{{"since", w.Since}, {"until", w.Until}} {
		switch {
		case b.t.IsZero():
		case b.t.Nanosecond()%int(time.Millisecond) != 0:
			return domain.Errorf(domain.CodeInvalidArgument, "%s %s: the history service takes whole milliseconds",
				b.name, b.t.UTC().Format(time.RFC3339Nano))
		case b.t.UnixMilli() == 0:
			return domain.Errorf(domain.CodeInvalidArgument, "%s 1970-01-01T00:00:00Z: the history service reads it as unset; give a later time", b.name)
		}
	}
	if err := audit.CheckLimit(limit, def); err != nil {
		return err
	}
	return audit.CheckFilters(nil, nil, ranks)
}

func ranks32(rs []int64) []int32 {
	out := make([]int32, len(rs))
	for i, r := range rs {
		out[i] = int32(r)
	}
	return out
}

func timeOf(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Reports implements ports.HistoryQuery.
func (h *HistoryClient) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	if err := carried(q.Window, q.Limit, audit.DefaultPageSize, q.Ranks); err != nil {
		return audit.ReportsPage{}, err
	}
	st := make([]pb.ReportStatus, len(q.Statuses))
	for i, s := range q.Statuses {
		st[i] = pb.ReportStatus(s)
	}
	resp, err := h.client.ListReports(ctx, request(h, &lrv1.ListReportsRequest{
		Window: windowToProto(q.Window), Workers: q.Workers, Statuses: st, Ranks: ranks32(q.Ranks),
		Limit: int32(q.Limit), Cursor: q.Cursor, Descending: q.Descending,
	}))
	if err != nil {
		return audit.ReportsPage{}, connectcode.FromConnect(ctx, err)
	}
	page := audit.ReportsPage{NextCursor: resp.Msg.GetNextCursor()}
	for _, r := range resp.Msg.GetReports() {
		page.Reports = append(page.Reports, ReportFromProto(r))
	}
	return page, nil
}

// Outages implements ports.HistoryQuery.
func (h *HistoryClient) Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error) {
	if err := carried(q.Window, q.Limit, audit.DefaultResultLimit, nil); err != nil {
		return audit.OutagesResult{}, err
	}
	resp, err := h.client.ListOutages(ctx, request(h, &lrv1.ListOutagesRequest{
		Window: windowToProto(q.Window), Workers: q.Workers, Limit: int32(q.Limit)}))
	if err != nil {
		return audit.OutagesResult{}, connectcode.FromConnect(ctx, err)
	}
	out := audit.OutagesResult{Truncated: resp.Msg.GetTruncated()}
	for _, o := range resp.Msg.GetOutages() {
		st := make([]domain.Status, len(o.GetStatuses()))
		for i, s := range o.GetStatuses() {
			st[i] = domain.Status(s)
		}
		out.Outages = append(out.Outages, audit.Outage{
			Episode:  episodeOf(o),
			Statuses: st, LastError: o.GetLastError(),
		})
	}
	return out, nil
}

// RankStats implements ports.HistoryQuery.
func (h *HistoryClient) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	if err := carried(q.Window, q.Limit, audit.DefaultResultLimit, q.Ranks); err != nil {
		return audit.RankStatsResult{}, err
	}
	resp, err := h.client.GetRankStats(ctx, request(h, &lrv1.GetRankStatsRequest{
		Window: windowToProto(q.Window), Workers: q.Workers, Ranks: ranks32(q.Ranks), Limit: int32(q.Limit)}))
	if err != nil {
		return audit.RankStatsResult{}, connectcode.FromConnect(ctx, err)
	}
	out := audit.RankStatsResult{Truncated: resp.Msg.GetTruncated()}
	for _, s := range resp.Msg.GetStats() {
		out.Stats = append(out.Stats, audit.RankStat{
			WorkerAddr: s.GetWorkerAddr(), DPRank: int64(s.GetDpRank()), Reports: s.GetReports(),
			AvgTokenUsage: s.GetAvgTokenUsage(), MaxTokenUsage: s.GetMaxTokenUsage(), P95TokenUsage: s.GetP95TokenUsage(),
			MaxWaitingReqs: s.GetMaxWaitingReqs(), MeanGenThroughput: s.GetMeanGenThroughput(),
		})
	}
	return out, nil
}

// Gaps implements ports.HistoryQuery.
func (h *HistoryClient) Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
	if err := carried(q.Window, q.Limit, audit.DefaultResultLimit, nil); err != nil {
		return audit.GapsResult{}, err
	}
	if q.Interval != 0 { // 0: the reporter's own; anything else must survive the trip in milliseconds
		if err := audit.CheckGapInterval(q.Interval); err != nil {
			return audit.GapsResult{}, err
		}
	}
	resp, err := h.client.ListGaps(ctx, request(h, &lrv1.ListGapsRequest{
		Window: windowToProto(q.Window), Workers: q.Workers, IntervalMs: q.Interval.Milliseconds(), Limit: int32(q.Limit)}))
	if err != nil {
		return audit.GapsResult{}, connectcode.FromConnect(ctx, err)
	}
	out := audit.GapsResult{Truncated: resp.Msg.GetTruncated()}
	for _, g := range resp.Msg.GetGaps() {
		out.Gaps = append(out.Gaps, audit.Gap{Span: spanOf(g)})
	}
	for _, r := range resp.Msg.GetRestarts() {
		out.Restarts = append(out.Restarts, audit.Restart{WorkerAddr: r.GetWorkerAddr(), SourceInstanceID: r.GetSourceInstanceId(),
			FirstTime: timeOf(r.GetFirstUnixMs()), PreviousSourceInstanceID: r.GetPreviousSourceInstanceId(),
			PreviousLastTime: timeOf(r.GetPreviousLastUnixMs())})
	}
	return out, nil
}

// Imbalance implements ports.HistoryQuery.
func (h *HistoryClient) Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
	if err := carried(q.Window, q.Limit, audit.DefaultResultLimit, nil); err != nil {
		return audit.ImbalanceResult{}, err
	}
	resp, err := h.client.ListImbalance(ctx, request(h, &lrv1.ListImbalanceRequest{
		Window: windowToProto(q.Window), Workers: q.Workers, Threshold: q.Threshold, Limit: int32(q.Limit)}))
	if err != nil {
		return audit.ImbalanceResult{}, connectcode.FromConnect(ctx, err)
	}
	out := audit.ImbalanceResult{Truncated: resp.Msg.GetTruncated()}
	for _, s := range resp.Msg.GetSpans() {
		out.Spans = append(out.Spans, audit.Imbalance{
			Episode:    episodeOf(s),
			PeakSpread: s.GetPeakSpread(), PeakTime: timeOf(s.GetPeakUnixMs()),
		})
	}
	return out, nil
}

// wireSpan is what the wire's Gap, Outage and Imbalance messages share.
type wireSpan interface {
	GetWorkerAddr() string
	GetStartUnixMs() int64
	GetEndUnixMs() int64
	GetDurationMs() int64
}

// wireEpisode is what the wire's Outage and Imbalance messages share.
type wireEpisode interface {
	wireSpan
	GetOngoing() bool
	GetLastSeenUnixMs() int64
	GetReports() int64
}

func spanOf(m wireSpan) audit.Span {
	return audit.Span{WorkerAddr: m.GetWorkerAddr(), Start: timeOf(m.GetStartUnixMs()), End: timeOf(m.GetEndUnixMs()),
		Duration: time.Duration(m.GetDurationMs()) * time.Millisecond}
}

func episodeOf(m wireEpisode) audit.Episode {
	return audit.Episode{Span: spanOf(m), Ongoing: m.GetOngoing(), LastSeen: timeOf(m.GetLastSeenUnixMs()), Reports: m.GetReports()}
}
