package client

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// waitWorker waits until w's view satisfies ok.
func waitWorker(ctx context.Context, t *testing.T, w *Worker, what string, ok func(*View) bool) {
	t.Helper()
	views, cancel := w.Subscribe()
	defer cancel()
	waitView(ctx, t, views, w.Addr()+" "+what, ok)
}

// A fleet of three real workers: picks only among Fresh ones while any is,
// follows Remove, and says Degraded when none is left; the metrics of all
// its workers share one registry.
func TestFleetAgainstRealWorkers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	ms := []*app.Main{startServer(t, nil), startServer(t, nil), startServer(t, nil)}
	reg := prometheus.NewPedanticRegistry()
	o := fastOptions(ProtocolGRPC)
	o.Registerer = reg
	o.StaleAfterIntervals = 40 // a slow race-detector run does not age a view between two asserts
	f := newFleetT(t, o, deps{})
	for _, m := range ms {
		if err := f.Add(m.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range f.Workers() {
		waitWorker(ctx, t, w, "fresh", isState(Fresh))
	}
	res := f.Pick(2)
	if res.Degraded || res.State != Fresh || len(res.Picks) != 2 || res.Picks[0].Worker == res.Picks[1].Worker {
		t.Fatalf("Pick(2) = %+v", res)
	}
	for _, p := range res.Picks {
		if p.View.Report == nil || p.BestRank < 0 || p.Score < 0 {
			t.Fatalf("pick %+v", p)
		}
	}
	if got := gauge(t, reg, "loadreporter_client_worker_state", "worker", ms[2].Addr()); got != 0 && got != 1 {
		t.Fatalf("state series %v", got)
	}

	if err := ms[0].Close(); err != nil {
		t.Fatal(err)
	}
	waitWorker(ctx, t, f.Worker(ms[0].Addr()), "disconnected", isState(Disconnected))
	for range 20 {
		if got := picked(f.Pick(3)); len(got) != 2 || slices.Contains(got, ms[0].Addr()) {
			t.Fatalf("Pick(3) = %v, want the two fresh workers", got)
		}
	}
	if !f.Remove(ms[1].Addr()) {
		t.Fatal("Remove")
	}
	if got := picked(f.Pick(3)); !slices.Equal(got, []string{ms[2].Addr()}) {
		t.Fatalf("Pick(3) = %v, want the last fresh worker", got)
	}
	if err := ms[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitWorker(ctx, t, f.Worker(ms[2].Addr()), "disconnected", isState(Disconnected))
	res = f.Pick(1)
	if !res.Degraded || res.State != Disconnected || len(res.Picks) != 1 {
		t.Fatalf("no fresh worker left: %+v", res)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "worker" && l.GetValue() == ms[1].Addr() {
					t.Fatalf("%s keeps a series of the removed worker", fam.GetName())
				}
			}
		}
	}
}
