package tests

import (
	"context"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // registers weighted_round_robin
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// usageEngine is a scripted engine of two ranks whose busiest rank's KV
// usage the test sets (the other rank holds half of it).
type usageEngine struct{ usage atomic.Uint64 } // math.Float64bits

func (e *usageEngine) set(u float64) { e.usage.Store(math.Float64bits(u)) }

func (e *usageEngine) Pull(context.Context) (domain.Snapshot, error) {
	u := math.Float64frombits(e.usage.Load())
	var s domain.Snapshot
	for i, share := range []float64{1, 0.5} {
		used := int64(u * share * 100000)
		s.Ranks = append(s.Ranks, domain.RankLoad{DPRank: int64(i), SnapshotTime: time.Now(), NumUsedTokens: used,
			MaxTotalNumTokens: 100000, MaxRunningRequests: 256, TokenUsage: float64(used) / 100000})
	}
	return s, nil
}

var _ ports.SnapshotSource = (*usageEngine)(nil)

// wrrServiceConfig is grpc-go's weighted_round_robin fed by out-of-band
// ORCA reports every 100 ms, weights used at once (no blackout) and
// recomputed every 100 ms (its floor). Names and defaults from grpc-go
// v1.85.0 balancer/weightedroundrobin/config.go:26-58 and balancer.go:120-128.
const wrrServiceConfig = `{"loadBalancingConfig":[{"weighted_round_robin":{
	"enableOobLoadReport":true,"oobReportingPeriod":"0.1s","blackoutPeriod":"0s","weightUpdatePeriod":"0.1s"}}]}`

// TestWeightedRoundRobinDialsReportersByName: grpc-go's own
// weighted_round_robin balancer, dialing two reporters by host name (a
// resolver of the router's that knows worker-a and worker-b, as a
// Kubernetes-aware one does; grpc-go sends the target's name as
// :authority on every stream, the ORCA one too), weighs them by our
// StreamCoreMetrics alone and sends most calls to the less utilized one;
// when their utilizations swap, so do the calls.
//
// WRR ignores a report whose utilization or rps_fractional is 0
// (balancer.go:546-575: weight = rps_fractional / (utilization +
// eps/rps_fractional × errorUtilizationPenalty)); adapters/orca sends
// rps_fractional 1 and at least 0.01, so the idle worker of the first
// phase is weighed (100 against 2) instead of left to the mean weight.
func TestWeightedRoundRobinDialsReportersByName(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	engines := map[string]*usageEngine{"worker-a.serving.svc:8080": {}, "worker-b.serving.svc:8080": {}}
	byName := map[string]string{} // host name → the reporter's 127.0.0.1 address
	byAddr := map[string]string{} // and back
	var loops []interface{ Count(session.Kind) int }
	var eps []resolver.Endpoint
	for name, e := range engines {
		e.set(0.5)
		c := testConfig()
		c.Sessions.MinInterval = 50 * time.Millisecond
		c.History.Interval = 0
		m := startMain(t, c, e)
		byName[name], byAddr[m.Addr()] = m.Addr(), name
		loops = append(loops, m.FireLoop())
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: name}}})
	}
	k8s := manual.NewBuilderWithScheme("k8s")
	k8s.InitialState(resolver.State{Endpoints: eps})
	cc, err := grpc.NewClient("k8s:///workers.serving.svc:8080", grpc.WithResolvers(k8s),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(wrrServiceConfig),
		grpc.WithContextDialer(func(ctx context.Context, name string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", byName[name])
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)

	// calls makes n health checks, picked by WRR, and counts which
	// reporter served each (the peer is the connection's remote address).
	calls := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			var p peer.Peer
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
				t.Fatal(err)
			}
			got[byAddr[p.Addr.String()]]++
		}
		return got
	}
	calls(1)
	eventually(t, ctx, "an ORCA stream from WRR on each reporter", func() bool {
		return loops[0].Count(session.KindORCA) == 1 && loops[1].Count(session.KindORCA) == 1
	})

	const a, b = "worker-a.serving.svc:8080", "worker-b.serving.svc:8080"
	for _, ph := range []struct {
		name         string
		usageA, usgB float64
		most         string
	}{
		{"A idle, B at 0.5", 0, 0.5, a},
		{"A at 0.9, B at 0.1", 0.9, 0.1, b},
	} {
		engines[a].set(ph.usageA)
		engines[b].set(ph.usgB)
		// Until the weights follow (a report each way, then a weight update):
		// a batch of 50 with at least 40 on the less utilized one.
		var got map[string]int
		eventually(t, ctx, ph.name+": WRR weighing by the reports", func() bool {
			got = calls(50)
			return got[ph.most] >= 40
		})
		got = calls(200)
		t.Logf("%s: 200 calls %v", ph.name, got)
		if got[ph.most] < 160 {
			t.Errorf("%s: %v; want at least 160 of 200 on %s", ph.name, got, ph.most)
		}
	}
}
