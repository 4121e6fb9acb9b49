package enginesim

import (
	"context"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/source/sglanggrpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanghttp"
	"github.com/loadreporter/loadreporter/adapters/source/sglangzmq"
	"github.com/loadreporter/loadreporter/adapters/source/vllm"
	"github.com/loadreporter/loadreporter/domain"
)

// TestSourcesReadTheEngine points the project's own snapshot sources at
// the simulated engine, as an operator would point loadreporter at an
// SGLang (or vLLM) engine: sglang-http reads /v1/loads, sglang-grpc calls
// GetLoads on the engine's gRPC port, vllm-metrics reads
// /metrics (with --vllm-metrics), and sglang-zmq finds the LoadStat
// sockets through /server_info and merges the slower /v1/loads detail.
// Each must read both ranks as the engine published them, and the
// snapshot must pass the domain's validation; sglang-http also takes each
// rank's snapshot time from its timestamp.
func TestSourcesReadTheEngine(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) {
		c.Params.DPSize = 2
		// Steps of half an hour: the state holds still while the sources
		// read it, whatever the fake clock does in between.
		c.Params.StepOverhead, c.Params.PrefillPerToken, c.Params.DecodePerSeq = 30*time.Minute, 0, 0
		c.LoadPublishEndpoint = "tcp://127.0.0.1:0"
		c.VLLMMetrics = true
		c.GRPCListen = "127.0.0.1:0"
	})
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	// Snapshot times with a fraction of a second to carry (ranks idle).
	h.clock.Advance(1234567891 * time.Nanosecond)
	for i, rank := range []int{0, 0, 0, 1} {
		resp := h.post(ctx, "/generate", map[string]any{"text": prompt(10 + i), "sampling_params": map[string]any{"max_new_tokens": 1000},
			"stream": true, "routed_dp_rank": rank})
		defer resp.Body.Close()
	}
	h.waitSubmitted(4)
	// The first arrival starts rank 0's step alone (the rest came after
	// it started); the second step prefills the other two.
	h.step()
	h.step()
	want := h.m.drv.loads()
	if want[0].NumRunningReqs != 3 || want[1].NumRunningReqs != 1 {
		t.Fatalf("engine published %+v", want)
	}
	expected := domain.NewRankSet(0, 1)

	httpSrc, err := sglanghttp.New(sglanghttp.Options{BaseURL: h.url})
	if err != nil {
		t.Fatal(err)
	}
	defer httpSrc.Close()
	snap, err := httpSrc.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.ValidateSnapshot(snap, expected); err != nil {
		t.Fatalf("sglang-http snapshot: %v", err)
	}
	for i, r := range snap.Ranks {
		w := want[i]
		if r.DPRank != int64(w.DPRank) || r.NumRunningReqs != int64(w.NumRunningReqs) || r.NumWaitingReqs != int64(w.NumWaitingReqs) ||
			r.NumUsedTokens != w.NumUsedTokens || r.NumTotalTokens != w.NumTotalTokens || r.MaxTotalNumTokens != w.MaxTotalNumTokens ||
			r.MaxRunningRequests != int64(w.MaxRunningRequests) || r.TokenUsage != w.TokenUsage || r.GenThroughput != w.GenThroughput {
			t.Errorf("sglang-http rank %d: %+v, engine published %+v", i, r, w)
		}
		// The rank's timestamp, seconds to the microsecond in a float,
		// is its snapshot time (a float64 of about 1.8e9 keeps a quarter
		// of a microsecond).
		if got := r.SnapshotTime.Round(time.Microsecond); !got.Equal(w.Timestamp.Truncate(time.Microsecond)) {
			t.Errorf("sglang-http rank %d: snapshot time %v, the engine took it at %v", i, r.SnapshotTime, w.Timestamp)
		}
	}

	grpcSrc, err := sglanggrpc.New(sglanggrpc.Options{Target: h.m.GRPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer grpcSrc.Close()
	gsnap, err := grpcSrc.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.ValidateSnapshot(gsnap, expected); err != nil {
		t.Fatalf("sglang-grpc snapshot: %v", err)
	}
	for i, r := range gsnap.Ranks {
		w := want[i]
		if r.DPRank != int64(w.DPRank) || r.NumRunningReqs != int64(w.NumRunningReqs) || r.NumWaitingReqs != int64(w.NumWaitingReqs) ||
			r.NumUsedTokens != w.NumUsedTokens || r.NumWaitingUncachedTokens != w.NumWaitingUncachedTokens ||
			r.MaxTotalNumTokens != w.MaxTotalNumTokens || r.MaxRunningRequests != int64(w.MaxRunningRequests) || r.TokenUsage != w.TokenUsage {
			t.Errorf("sglang-grpc rank %d: %+v, engine published %+v", i, r, w)
		}
	}

	vllmSrc, err := vllm.New(vllm.Options{BaseURL: h.url, MaxRunningRequests: 256, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	defer vllmSrc.Close()
	vsnap, err := vllmSrc.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.ValidateSnapshot(vsnap, expected); err != nil {
		t.Fatalf("vllm snapshot: %v", err)
	}
	for i, r := range vsnap.Ranks {
		w := want[i]
		if r.DPRank != int64(w.DPRank) || r.NumRunningReqs != int64(w.NumRunningReqs) || r.NumWaitingReqs != int64(w.NumWaitingReqs) ||
			r.TokenUsage != w.TokenUsage || r.MaxTotalNumTokens != w.MaxTotalNumTokens {
			t.Errorf("vllm rank %d: %+v, engine published %+v", i, r, w)
		}
	}

	zmqSrc, err := sglangzmq.New(sglangzmq.Options{EngineURL: h.url, Clock: clock.System{},
		Detail: httpSrc, DetailInterval: 20 * time.Millisecond, DiscoveryRetry: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := zmqSrc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer zmqSrc.Close()
	// PUB drops what it sends before a subscriber is there; the engine
	// resends each rank's stat once a second of its clock, so each round
	// moves the fake clock a second on.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		zsnap, err := zmqSrc.Pull(ctx)
		if err == nil {
			err = domain.ValidateSnapshot(zsnap, expected)
		}
		if err == nil && zsnap.Ranks[0].NumRunningReqs == 3 && zsnap.Ranks[1].NumRunningReqs == 1 &&
			zsnap.Ranks[0].NumUsedTokens == want[0].NumUsedTokens && zsnap.Ranks[1].MaxRunningRequests == 256 {
			break
		}
		last = err
		h.clock.Advance(heartbeat)
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("sglang-zmq never read the ranks: %v", last)
		}
	}
}
