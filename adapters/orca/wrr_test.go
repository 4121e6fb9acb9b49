package orca

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // registers weighted_round_robin
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
)

// wrrConfig turns on grpc-go's weighted_round_robin with out-of-band ORCA
// reports every 50 ms and weights recomputed every 100 ms (its floor).
const wrrConfig = `{"loadBalancingConfig": [{"weighted_round_robin": {
	"enableOobLoadReport": true, "oobReportingPeriod": "0.05s",
	"blackoutPeriod": "0.01s", "weightUpdatePeriod": "0.1s", "weightExpirationPeriod": "60s"}}]}`

// backend is one worker as a WRR client sees it: on one port, a trivial
// gRPC service (grpc-go's health service, served by grpc-go) that counts
// its calls, and StreamCoreMetrics from its own fire loop.
type backend struct {
	addr   string
	engine *engine
	loop   *fireloop.Loop
	calls  atomic.Int64
}

func startBackend(t *testing.T, usage float64) *backend {
	t.Helper()
	b := &backend{engine: &engine{ranks: 2}}
	b.engine.set(modeHealthy, usage)
	b.loop = startLoop(t, b.engine, session.DefaultLimits())
	svc, err := New(b.loop, Options{})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	t.Cleanup(gs.Stop)
	mux := mount(svc)
	mux.Handle("/"+healthpb.Health_ServiceDesc.ServiceName+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/Check") {
			b.calls.Add(1)
		}
		gs.ServeHTTP(w, r)
	}))
	b.addr = serveH2C(t, mux)
	return b
}

// spread makes n Check calls and returns how many each backend served.
func spread(t *testing.T, ctx context.Context, hc healthpb.HealthClient, bs []*backend, n int) []int64 {
	t.Helper()
	for _, b := range bs {
		b.calls.Store(0)
	}
	for range n {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.calls.Load()
	}
	return out
}

// settle sends batches of calls until cond holds for a batch's spread,
// i.e. until the balancer's weights reflect the latest ORCA reports.
func settle(t *testing.T, ctx context.Context, hc healthpb.HealthClient, bs []*backend, what string, cond func([]int64) bool) {
	t.Helper()
	for {
		if got := spread(t, ctx, hc, bs, 60); cond(got) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the balancer never weighed the backends %s", what)
		}
	}
}

// TestWeightedRoundRobinFollowsKVUsage: grpc-go's weighted_round_robin,
// fed only by our StreamCoreMetrics streams (out-of-band ORCA), sends the
// least loaded of three workers (KV usage 0.1, 0.5, 0.9) the most calls,
// and steers away from a worker whose engine becomes unreachable.
func TestWeightedRoundRobinFollowsKVUsage(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 25*time.Second)
	bs := []*backend{startBackend(t, 0.1), startBackend(t, 0.5), startBackend(t, 0.9)}
	res := manual.NewBuilderWithScheme("orcawrr")
	var eps []resolver.Endpoint
	for _, b := range bs {
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: b.addr}}})
	}
	res.InitialState(resolver.State{Endpoints: eps})
	cc, err := grpc.NewClient(res.Scheme()+":///workers", grpc.WithResolvers(res),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(wrrConfig))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)

	spread(t, ctx, hc, bs, 1) // connects; WRR then opens one ORCA stream per backend
	waitFor(t, ctx, "an ORCA stream on every backend", func() bool {
		return bs[0].loop.Count(session.KindORCA) == 1 && bs[1].loop.Count(session.KindORCA) == 1 &&
			bs[2].loop.Count(session.KindORCA) == 1
	})
	settle(t, ctx, hc, bs, "by KV usage", func(c []int64) bool { return c[0] > c[1] && c[1] > c[2] })
	got := spread(t, ctx, hc, bs, 600)
	t.Logf("600 calls over KV usage 0.1 / 0.5 / 0.9: %v (WRR weights 10 : 2 : 1.1)", got)
	if got[0] <= got[1] || got[1] <= got[2] || float64(got[0]) < 1.5*float64(got[2]) {
		t.Fatalf("spread %v: want the least loaded first, at least 1.5× the most loaded", got)
	}

	bs[0].engine.set(modeFailing, 0)
	settle(t, ctx, hc, bs, "after the engine failed", func(c []int64) bool { return c[0] < c[2] })
	got = spread(t, ctx, hc, bs, 600)
	t.Logf("600 calls, UNREACHABLE / 0.5 / 0.9: %v (WRR weights 0.5 : 2 : 1.1)", got)
	if got[0] >= got[2] || got[2] >= got[1] {
		t.Fatalf("spread %v: want the unreachable worker last", got)
	}
}
