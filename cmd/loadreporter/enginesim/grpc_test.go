package enginesim

import (
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// grpcClient is a gRPC client (Connect speaking the gRPC protocol over
// h2c, as SMG's gRPC mode dials an engine) of h's scheduler service.
func grpcClient(t *testing.T, h *harness) schedulerconnect.SglangSchedulerClient {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	t.Cleanup(tr.CloseIdleConnections)
	return schedulerconnect.NewSglangSchedulerClient(&http.Client{Transport: tr}, "http://"+h.m.GRPCAddr(), connect.WithGRPC())
}

// generation is a Generate call read in the background: the client
// returns the stream only once the first message came.
type generation struct {
	t    *testing.T
	h    *harness
	msgs chan *pb.GenerateResponse
	err  error // set before msgs closes
}

func generate(t *testing.T, h *harness, client schedulerconnect.SglangSchedulerClient, req *pb.GenerateRequest) *generation {
	g := &generation{t: t, h: h, msgs: make(chan *pb.GenerateResponse, 64)}
	go func() {
		defer close(g.msgs)
		s, err := client.Generate(h.ctx, connect.NewRequest(req))
		if err != nil {
			g.err = err
			return
		}
		defer s.Close()
		for s.Receive() {
			g.msgs <- s.Msg()
		}
		g.err = s.Err()
	}()
	return g
}

// next is the next message; ok is false once the stream ended.
func (g *generation) next() (*pb.GenerateResponse, bool) {
	g.t.Helper()
	select {
	case m, ok := <-g.msgs:
		return m, ok
	case <-g.h.ctx.Done():
		g.t.Fatal("no message from Generate")
		return nil, false
	}
}

func ids(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i + 1)
	}
	return out
}

// TestGRPCGenerateStreams: Generate with stream sends a chunk with the new
// token ids and running counts as each step produces them, then a
// GenerateComplete with every id and the finish reason (the messages of
// SGLang's sglang_scheduler.proto, cited in the vendored proto).
func TestGRPCGenerateStreams(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.GRPCListen = "127.0.0.1:0"; c.DefaultMaxTokens = 2 })
	client := grpcClient(t, h)
	max := uint32(3)
	g := generate(t, h, client, &pb.GenerateRequest{
		RequestId: "g1", Tokenized: &pb.TokenizedInput{InputIds: ids(10)}, SamplingParams: &pb.SamplingParams{MaxNewTokens: &max}, Stream: true,
	})
	h.waitSubmitted(1)
	for k := 1; k <= 3; k++ {
		h.step()
		msg, ok := g.next()
		c := msg.GetChunk()
		if !ok || msg.GetRequestId() != "g1" || len(c.GetTokenIds()) != 1 || c.GetTokenIds()[0] != uint32(tokenID(k-1)) ||
			c.GetCompletionTokens() != uint32(k) || c.GetPromptTokens() != 10 {
			t.Fatalf("chunk %d: %v %v", k, msg, g.err)
		}
	}
	if msg, _ := g.next(); msg.GetComplete().GetFinishReason() != "length" || len(msg.GetComplete().GetOutputIds()) != 3 ||
		msg.GetComplete().GetCompletionTokens() != 3 || msg.GetComplete().MatchedStop != nil {
		t.Fatalf("complete %v", msg)
	}
	if msg, ok := g.next(); ok || g.err != nil {
		t.Fatalf("after the complete: %v %v", msg, g.err)
	}

	// Not streaming, and with no max_new_tokens: one GenerateComplete that
	// stopped at the end-of-turn token.
	done := make(chan struct{})
	var msgs []*pb.GenerateResponse
	var serr error
	go func() {
		defer close(done)
		s, err := client.Generate(h.ctx, connect.NewRequest(&pb.GenerateRequest{Tokenized: &pb.TokenizedInput{InputIds: ids(4)}}))
		if err != nil {
			serr = err
			return
		}
		defer s.Close()
		for s.Receive() {
			msgs = append(msgs, s.Msg())
		}
		serr = s.Err()
	}()
	h.drive(done)
	if serr != nil || len(msgs) != 1 || msgs[0].GetComplete().GetFinishReason() != "stop" || msgs[0].GetComplete().GetMatchedTokenId() != eosTokenID ||
		len(msgs[0].GetComplete().GetOutputIds()) != 2 || msgs[0].GetRequestId() == "" {
		t.Fatalf("%v %v", msgs, serr)
	}

	// An empty prompt is a status, not a message.
	s, err := client.Generate(h.ctx, connect.NewRequest(&pb.GenerateRequest{}))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
		s.Close()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("empty prompt: %v, want InvalidArgument", err)
	}
}

// TestGRPCAbortFreesSlot: Abort by request id ends a running Generate
// with finish reason abort and frees its slot for the waiting request.
func TestGRPCAbortFreesSlot(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.GRPCListen = "127.0.0.1:0"; c.Params.MaxRunningRequests = 1 })
	client := grpcClient(t, h)
	max := uint32(100)
	a := generate(t, h, client, &pb.GenerateRequest{RequestId: "a", Tokenized: &pb.TokenizedInput{InputIds: ids(5)},
		SamplingParams: &pb.SamplingParams{MaxNewTokens: &max}, Stream: true})
	h.waitSubmitted(1)
	b := generate(t, h, client, &pb.GenerateRequest{RequestId: "b", Tokenized: &pb.TokenizedInput{InputIds: ids(5)}, Stream: true})
	h.waitSubmitted(2)
	h.step() // a's prefill
	if msg, ok := a.next(); !ok || msg.GetChunk() == nil {
		t.Fatal(a.err)
	}
	resp, err := client.Abort(h.ctx, connect.NewRequest(&pb.AbortRequest{RequestId: "a"}))
	if err != nil || !resp.Msg.GetSuccess() {
		t.Fatalf("abort: %v %v", resp, err)
	}
	if msg, _ := a.next(); msg.GetComplete().GetFinishReason() != "abort" {
		t.Fatalf("a after the abort: %v %v", msg, a.err)
	}
	if resp, err := client.Abort(h.ctx, connect.NewRequest(&pb.AbortRequest{RequestId: "a"})); err != nil || resp.Msg.GetSuccess() {
		t.Errorf("second abort: %v %v, want no such request", resp, err)
	}
	h.step() // the step a was in
	h.step() // b's prefill
	if msg, _ := b.next(); msg.GetChunk().GetCompletionTokens() != 1 {
		t.Fatalf("b: %v %v", msg, b.err)
	}
}

// TestGRPCInfoHealthLoads: HealthCheck, GetModelInfo, GetServerInfo and
// GetLoads (include groups, dp_rank filter, aggregate) answer as the HTTP
// routes do.
func TestGRPCInfoHealthLoads(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.GRPCListen = "127.0.0.1:0"; c.Params.DPSize = 2 })
	client := grpcClient(t, h)
	done := make(chan struct{})
	var health *connect.Response[pb.HealthCheckResponse]
	var herr error
	go func() {
		defer close(done)
		health, herr = client.HealthCheck(h.ctx, connect.NewRequest(&pb.HealthCheckRequest{}))
	}()
	h.drive(done)
	if herr != nil || !health.Msg.GetHealthy() {
		t.Fatalf("health: %v %v", health, herr)
	}
	mi, err := client.GetModelInfo(h.ctx, connect.NewRequest(&pb.GetModelInfoRequest{}))
	if err != nil || mi.Msg.GetServedModelName() != h.m.cfg.ServedModelName || !mi.Msg.GetIsGeneration() || mi.Msg.GetMaxContextLength() != 131072 {
		t.Errorf("model info: %v %v", mi, err)
	}
	si, err := client.GetServerInfo(h.ctx, connect.NewRequest(&pb.GetServerInfoRequest{}))
	if err != nil || si.Msg.GetServerType() != "grpc" || si.Msg.GetMaxTotalNumTokens() != 400000 ||
		si.Msg.GetServerArgs().GetFields()["dp_size"].GetNumberValue() != 2 || si.Msg.GetSglangVersion() != DefaultVersion {
		t.Errorf("server info: %v %v", si, err)
	}
	core, err := client.GetLoads(h.ctx, connect.NewRequest(&pb.GetLoadsRequest{Include: []string{"core"}}))
	if err != nil || len(core.Msg.GetLoads()) != 2 || core.Msg.GetLoads()[1].GetDpRank() != 1 || core.Msg.GetLoads()[0].Memory != nil ||
		core.Msg.GetLoads()[0].GetMaxTotalNumTokens() != 400000 || core.Msg.GetDpRankCount() != 2 || core.Msg.GetVersion() != DefaultVersion {
		t.Errorf("core loads: %v %v", core, err)
	}
	one := int32(1)
	all, err := client.GetLoads(h.ctx, connect.NewRequest(&pb.GetLoadsRequest{DpRank: &one}))
	if err != nil || len(all.Msg.GetLoads()) != 1 || all.Msg.GetLoads()[0].GetDpRank() != 1 || all.Msg.GetLoads()[0].GetMemory().GetTokenCapacity() != 400000 ||
		all.Msg.GetLoads()[0].GetQueues() == nil || all.Msg.GetLoads()[0].GetDisaggregation().GetMode() != "null" {
		t.Errorf("rank 1, all sections: %v %v", all, err)
	}
	_, err = client.GetLoads(h.ctx, connect.NewRequest(&pb.GetLoadsRequest{Include: []string{"bogus"}}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Errorf("bogus include: %v, want InvalidArgument", err)
	}
}
