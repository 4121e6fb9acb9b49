package pollapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// GetLoadsProcedure is SGLang's scheduler method that gRPC pollers (SMG in
// its gRPC connection mode) call for a worker's load.
const GetLoadsProcedure = schedulerconnect.SglangSchedulerGetLoadsProcedure

// GetLoadsHandler answers sglang.grpc.scheduler.SglangScheduler/GetLoads
// from the shared pull, in gRPC, gRPC-Web and Connect: SGLang's response
// (timestamp, version, dp_rank_count, the core of every rank, the
// aggregate), counts saturated at int32, the include vocabulary and the
// dp_rank filter honoured as the engine honours them. A report no poller
// may route on (UNREACHABLE, or STALE without ServeStale) is the status
// UNAVAILABLE saying why: a gRPC poller reads a failed call as no load,
// never as numbers.
func (h *Handler) GetLoadsHandler(opts ...connect.HandlerOption) http.Handler {
	return connect.NewUnaryHandler(GetLoadsProcedure, h.getLoads, opts...)
}

func (h *Handler) getLoads(ctx context.Context, req *connect.Request[schedulerpb.GetLoadsRequest]) (*connect.Response[schedulerpb.GetLoadsResponse], error) {
	if err := checkInclude(req.Msg.GetInclude()); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	rep, err := h.poller.Poll(ctx, h.opts.MaxAge)
	if err != nil {
		if ctx.Err() != nil {
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		// The one table's code; whatever it does not list is a poll that
		// found no load, which a gRPC poller reads as no load.
		code, ok := connectcode.Code(domain.ErrorCode(err))
		if !ok {
			code = connect.CodeUnavailable
		}
		return nil, connect.NewError(code, errors.New(domain.ErrorMessage(err)))
	}
	if refused := h.refusal(rep); refused != nil {
		msg := fmt.Sprintf("%s: %s", refused.Error.Code, refused.Error.Message)
		return nil, connect.NewError(connect.CodeUnavailable, errors.New(msg))
	}
	ranks := rep.Ranks
	if req.Msg.DpRank != nil {
		ranks = slices.DeleteFunc(slices.Clone(ranks), func(k domain.RankLoad) bool { return k.DPRank != int64(req.Msg.GetDpRank()) })
	}
	agg := AggregateOf(ranks)
	out := &schedulerpb.GetLoadsResponse{
		Timestamp:   pythonISOFormat(rep.ReportTime),
		Version:     "loadreporter",
		DpRankCount: int32(min(len(rep.Ranks), domain.MaxRanks)),
		Loads:       make([]*schedulerpb.SchedulerLoad, len(ranks)),
		Aggregate: &schedulerpb.AggregateMetrics{
			TotalRunningReqs: agg.TotalRunningReqs, TotalWaitingReqs: agg.TotalWaitingReqs, TotalReqs: agg.TotalReqs,
			AvgTokenUsage: agg.AvgTokenUsage, AvgThroughput: agg.AvgThroughput, AvgUtilization: agg.AvgUtilization,
		},
	}
	for i, k := range ranks {
		out.Loads[i] = &schedulerpb.SchedulerLoad{
			DpRank:                   int32(k.DPRank),
			NumRunningReqs:           sat32(k.NumRunningReqs),
			NumWaitingReqs:           sat32(k.NumWaitingReqs),
			NumTotalReqs:             sat32(addSat(k.NumRunningReqs, k.NumWaitingReqs)),
			NumUsedTokens:            sat32(k.NumUsedTokens),
			MaxTotalNumTokens:        sat32(k.MaxTotalNumTokens),
			TokenUsage:               k.TokenUsage,
			GenThroughput:            k.GenThroughput,
			CacheHitRate:             k.CacheHitRate,
			Utilization:              k.Utilization,
			MaxRunningRequests:       sat32(k.MaxRunningRequests),
			NumWaitingUncachedTokens: sat32(k.NumWaitingUncachedTokens),
		}
	}
	return connect.NewResponse(out), nil
}
