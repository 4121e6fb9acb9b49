package rpc

import (
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// ReportToProto maps a domain report to the wire LoadReport.
func ReportToProto(r *domain.Report) *pb.LoadReport {
	out := &pb.LoadReport{
		SourceInstanceId: r.SourceInstanceID,
		SequenceId:       r.SequenceID,
		ReportTimeUnixMs: r.ReportTime.UnixMilli(),
		Worker:           WorkerToProto(r.Worker),
		Status:           pb.ReportStatus(r.Status),
	}
	if r.LastError != "" {
		out.LastError = &r.LastError
	}
	if len(r.Ranks) > 0 {
		out.Ranks = make([]*pb.RankLoad, len(r.Ranks))
		for i := range r.Ranks {
			out.Ranks[i] = RankToProto(&r.Ranks[i])
		}
	}
	return out
}

// WorkerToProto maps the worker identity; empty model and zone stay absent.
func WorkerToProto(w domain.Worker) *pb.Worker {
	out := &pb.Worker{WorkerAddr: w.Addr, WorkerType: pb.WorkerType(w.Type)}
	if w.Model != "" {
		out.Model = &w.Model
	}
	if w.Zone != "" {
		out.Zone = &w.Zone
	}
	return out
}

// RankToProto maps one rank. DPRank was validated to fit int32.
func RankToProto(r *domain.RankLoad) *pb.RankLoad {
	return &pb.RankLoad{
		DpRank:                   int32(r.DPRank),
		SnapshotTimeUnixMs:       r.SnapshotTime.UnixMilli(),
		NumRunningReqs:           r.NumRunningReqs,
		NumWaitingReqs:           r.NumWaitingReqs,
		NumWaitingUncachedTokens: r.NumWaitingUncachedTokens,
		NumUsedTokens:            r.NumUsedTokens,
		NumTotalTokens:           r.NumTotalTokens,
		MaxTotalNumTokens:        r.MaxTotalNumTokens,
		MaxRunningRequests:       r.MaxRunningRequests,
		TokenUsage:               r.TokenUsage,
		GenThroughput:            r.GenThroughput,
		CacheHitRate:             r.CacheHitRate,
		Utilization:              r.Utilization,
	}
}

func ackFrame(cfg session.Config) *pb.WorkerFrame {
	return &pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: &pb.RegisterResponse{
		LeaseTtlMs:   cfg.Lease.Milliseconds(),
		RenewAfterMs: cfg.RenewAfter().Milliseconds(),
	}}}
}

func errorFrame(err error) *pb.WorkerFrame {
	return &pb.WorkerFrame{Payload: &pb.WorkerFrame_Error{Error: &pb.StreamError{
		Code:    domain.ErrorCode(err),
		Message: domain.ErrorMessage(err),
	}}}
}

// ReportFromProto maps a wire report back to the domain.
func ReportFromProto(r *pb.LoadReport) *domain.Report {
	out := &domain.Report{
		SourceInstanceID: r.GetSourceInstanceId(),
		SequenceID:       r.GetSequenceId(),
		ReportTime:       time.UnixMilli(r.GetReportTimeUnixMs()).UTC(),
		Worker: domain.Worker{Addr: r.GetWorker().GetWorkerAddr(), Type: domain.WorkerType(r.GetWorker().GetWorkerType()),
			Model: r.GetWorker().GetModel(), Zone: r.GetWorker().GetZone()},
		Status:    domain.Status(r.GetStatus()),
		LastError: r.GetLastError(),
	}
	for _, k := range r.GetRanks() {
		out.Ranks = append(out.Ranks, domain.RankLoad{
			DPRank: int64(k.GetDpRank()), SnapshotTime: time.UnixMilli(k.GetSnapshotTimeUnixMs()).UTC(),
			NumRunningReqs: k.GetNumRunningReqs(), NumWaitingReqs: k.GetNumWaitingReqs(),
			NumWaitingUncachedTokens: k.GetNumWaitingUncachedTokens(), NumUsedTokens: k.GetNumUsedTokens(),
			NumTotalTokens: k.GetNumTotalTokens(), MaxTotalNumTokens: k.GetMaxTotalNumTokens(),
			MaxRunningRequests: k.GetMaxRunningRequests(), TokenUsage: k.GetTokenUsage(),
			GenThroughput: k.GetGenThroughput(), CacheHitRate: k.GetCacheHitRate(), Utilization: k.GetUtilization(),
		})
	}
	return out
}
