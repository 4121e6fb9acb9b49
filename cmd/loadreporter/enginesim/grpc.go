package enginesim

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// grpcService is sglang.grpc.scheduler.SglangScheduler over the same
// engine, as SGLang serves it in gRPC mode (the messages of
// proto/sglang/grpc/scheduler/scheduler.proto, whose numbers are SGLang's).
// Errors are gRPC statuses, as there: a request the engine refuses is
// InvalidArgument, one cut by shutdown Unavailable.
type grpcService struct {
	m *Main

	mu  sync.Mutex
	rid map[string]*flight // Generate calls in flight, for Abort
}

var _ schedulerconnect.SglangSchedulerHandler = (*grpcService)(nil)

func newGRPCService(m *Main) *grpcService { return &grpcService{m: m, rid: map[string]*flight{}} }

// handler serves the service over HTTP/2 (with and without TLS) and, for
// Connect clients, HTTP/1.1.
func (g *grpcService) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(schedulerconnect.NewSglangSchedulerHandler(g))
	return mux
}

// grpcError turns an engine error into a status.
func grpcError(err error) error {
	switch domain.ErrorCode(err) {
	case domain.CodeInvalidArgument:
		return connect.NewError(connect.CodeInvalidArgument, errors.New(domain.ErrorMessage(err)))
	case domain.CodeShuttingDown:
		return connect.NewError(connect.CodeUnavailable, errors.New(domain.ErrorMessage(err)))
	}
	return connect.NewError(connect.CodeInternal, errors.New(domain.ErrorMessage(err)))
}

// Generate runs one request. Streaming, each batch of new tokens is a
// chunk with the running counts; either way a GenerateComplete ends it. A
// request that sets no max_new_tokens ends with finish reason "stop" at
// Llama 3's end-of-turn token, as if the model had stopped.
func (g *grpcService) Generate(ctx context.Context, req *connect.Request[pb.GenerateRequest], stream *connect.ServerStream[pb.GenerateResponse]) error {
	in := req.Msg
	j := job{rid: in.GetRequestId(), req: model.Request{PromptTokens: len(in.GetTokenized().GetInputIds()), Rank: model.AnyRank}}
	if j.rid == "" {
		j.rid = newRID()
	}
	j.req.MaxNewTokens, j.defaulted = g.m.cfg.DefaultMaxTokens, true
	if sp := in.GetSamplingParams(); sp != nil && sp.MaxNewTokens != nil {
		j.req.MaxNewTokens, j.defaulted = int(sp.GetMaxNewTokens()), false
	}
	// proto3 cannot tell rank 0 from unset; SGLang reads 0 as no routing.
	switch r := in.GetDataParallelRank(); {
	case r < 0:
		return grpcError(badRequest("data_parallel_rank %d: want a rank ≥ 0", r))
	case r > 0:
		j.req.Rank = int(r)
	}
	f, err := g.m.drv.submit(j.req, false)
	if err != nil {
		return grpcError(err)
	}
	defer g.m.drv.cancel(f)
	g.mu.Lock()
	g.rid[j.rid] = f
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.rid, j.rid)
		g.mu.Unlock()
	}()
	counts := func(tokens int) (uint32, uint32) { return uint32(j.req.PromptTokens), uint32(tokens) }
	seen := 0
	for {
		tokens, done, aborted, st, err := g.m.await(ctx, f, seen)
		if err != nil {
			return connect.NewError(connect.CodeCanceled, err)
		}
		if in.GetStream() && tokens > seen {
			p, c := counts(tokens)
			ids := make([]uint32, 0, tokens-seen)
			for k := seen; k < tokens; k++ {
				ids = append(ids, uint32(tokenID(k)))
			}
			if err := stream.Send(&pb.GenerateResponse{RequestId: j.rid, Response: &pb.GenerateResponse_Chunk{Chunk: &pb.GenerateStreamChunk{
				TokenIds: ids, PromptTokens: p, CompletionTokens: c}}}); err != nil {
				return err
			}
		}
		seen = tokens
		if !done {
			continue
		}
		if aborted {
			return grpcError(shuttingDown())
		}
		p, c := counts(tokens)
		ids := make([]uint32, tokens)
		for k := range ids {
			ids[k] = uint32(tokenID(k))
		}
		reason, _ := chatFinish(j, false)
		if st.Cancelled { // by Abort
			reason = "abort"
		}
		complete := &pb.GenerateComplete{OutputIds: ids, FinishReason: reason, PromptTokens: p, CompletionTokens: c}
		if j.defaulted && !st.Cancelled {
			complete.MatchedStop = &pb.GenerateComplete_MatchedTokenId{MatchedTokenId: eosTokenID}
		}
		return stream.Send(&pb.GenerateResponse{RequestId: j.rid, Response: &pb.GenerateResponse_Complete{Complete: complete}})
	}
}

// HealthCheck probes the engine as /health does.
func (g *grpcService) HealthCheck(ctx context.Context, _ *connect.Request[pb.HealthCheckRequest]) (*connect.Response[pb.HealthCheckResponse], error) {
	if ok, why := g.m.probe(ctx); !ok {
		return connect.NewResponse(&pb.HealthCheckResponse{Healthy: false, Message: why}), nil
	}
	return connect.NewResponse(&pb.HealthCheckResponse{Healthy: true, Message: "healthy"}), nil
}

// Abort ends a Generate call by its request id; its slot and KV tokens
// are freed at once.
func (g *grpcService) Abort(_ context.Context, req *connect.Request[pb.AbortRequest]) (*connect.Response[pb.AbortResponse], error) {
	g.mu.Lock()
	f, ok := g.rid[req.Msg.GetRequestId()]
	g.mu.Unlock()
	if !ok {
		return connect.NewResponse(&pb.AbortResponse{Success: false, Message: "no running request " + domain.Shorten(req.Msg.GetRequestId(), 80)}), nil
	}
	g.m.drv.cancel(f)
	return connect.NewResponse(&pb.AbortResponse{Success: true, Message: "aborted"}), nil
}

// GetModelInfo describes the served model (Llama 3's token ids).
func (g *grpcService) GetModelInfo(context.Context, *connect.Request[pb.GetModelInfoRequest]) (*connect.Response[pb.GetModelInfoResponse], error) {
	c := g.m.cfg
	return connect.NewResponse(&pb.GetModelInfoResponse{
		ModelPath: c.ServedModelName, TokenizerPath: c.ServedModelName, IsGeneration: true, WeightVersion: "default",
		ServedModelName: c.ServedModelName, MaxContextLength: int32(c.Params.ContextLength), VocabSize: 128256,
		ModelType: "llama", EosTokenIds: []int32{128001, 128008, eosTokenID}, BosTokenId: 128000,
		MaxReqInputLen: int32(c.Params.ContextLength - 1), Architectures: []string{"LlamaForCausalLM"},
	}), nil
}

// GetServerInfo describes the server: the arguments /server_info shows,
// the scheduler's info, the requests in flight.
func (g *grpcService) GetServerInfo(context.Context, *connect.Request[pb.GetServerInfoRequest]) (*connect.Response[pb.GetServerInfoResponse], error) {
	args, err := structpb.NewStruct(g.m.serverArgs())
	if err != nil {
		return nil, grpcError(err)
	}
	sched, err := structpb.NewStruct(g.m.schedulerInfo())
	if err != nil {
		return nil, grpcError(err)
	}
	now := g.m.clock.Now()
	return connect.NewResponse(&pb.GetServerInfoResponse{
		ServerArgs: args, SchedulerInfo: sched, ActiveRequests: int32(g.m.drv.inFlight()),
		LastReceiveTimestamp: float64(now.UnixNano()) / 1e9, UptimeSeconds: now.Sub(g.m.started).Seconds(),
		SglangVersion: g.m.cfg.Version, ServerType: "grpc", StartTime: timestamppb.New(g.m.started),
		MaxTotalNumTokens: int32(g.m.cfg.Params.MaxTotalNumTokens),
	}), nil
}

// GetLoads is /v1/loads over gRPC: the published snapshots, the include
// groups and the dp_rank filter, and the aggregate over the ranks sent.
// The rank's timestamp stays behind: SchedulerLoad has no field for it.
func (g *grpcService) GetLoads(_ context.Context, req *connect.Request[pb.GetLoadsRequest]) (*connect.Response[pb.GetLoadsResponse], error) {
	include, err := parseInclude(req.Msg.GetInclude())
	if err != nil {
		return nil, grpcError(err)
	}
	loads := g.m.drv.loads()
	if req.Msg.DpRank != nil {
		loads = slices.DeleteFunc(loads, func(l model.Load) bool { return l.DPRank != int(req.Msg.GetDpRank()) })
	}
	out := &pb.GetLoadsResponse{
		Timestamp: g.m.clock.Now().UTC().Format("2006-01-02T15:04:05.000000-07:00"),
		Version:   g.m.cfg.Version, DpRankCount: int32(g.m.cfg.Params.DPSize), Aggregate: &pb.AggregateMetrics{},
	}
	agg := out.Aggregate
	for _, l := range loads {
		j := g.m.rankJSON(l, include)
		s := &pb.SchedulerLoad{
			DpRank: int32(j.DPRank), NumRunningReqs: int32(j.NumRunningReqs), NumWaitingReqs: int32(j.NumWaitingReqs),
			NumTotalReqs: int32(j.NumRunningReqs + j.NumWaitingReqs), NumUsedTokens: int32(j.NumUsedTokens),
			MaxTotalNumTokens: int32(j.MaxTotalNumTokens), TokenUsage: j.TokenUsage, GenThroughput: j.GenThroughput,
			CacheHitRate: j.CacheHitRate, Utilization: j.Utilization, MaxRunningRequests: int32(j.MaxRunningRequests),
			NumWaitingUncachedTokens: int32(j.NumWaitingUncachedTokens),
		}
		if mem := j.Memory; mem != nil {
			s.Memory = &pb.MemoryMetrics{WeightGb: mem.WeightGB, KvCacheGb: mem.KVCacheGB, GraphGb: mem.GraphGB, TokenCapacity: int32(mem.TokenCapacity)}
		}
		if j.Disaggregation != nil {
			s.Disaggregation = &pb.DisaggregationMetrics{Mode: j.Disaggregation.Mode}
		}
		if q := j.Queues; q != nil {
			s.Queues = &pb.QueueMetrics{Waiting: int32(q.Waiting)}
		}
		out.Loads = append(out.Loads, s)
		agg.TotalRunningReqs += s.NumRunningReqs
		agg.TotalWaitingReqs += s.NumWaitingReqs
		agg.TotalReqs += s.NumTotalReqs
		agg.AvgTokenUsage += s.TokenUsage
		agg.AvgThroughput += s.GenThroughput
		agg.AvgUtilization += s.Utilization
	}
	if n := float64(len(loads)); n > 0 {
		agg.AvgTokenUsage /= n
		agg.AvgThroughput /= n
		agg.AvgUtilization /= n
	}
	return connect.NewResponse(out), nil
}
