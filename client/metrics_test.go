package client

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Workers dialed one by one onto one Registerer share its collectors; the
// state is one-hot per worker; a foreign collector under our name is an
// error, not a panic.
func TestMetricsShareOneRegisterer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	reg := prometheus.NewPedanticRegistry()
	o := fastOptions(ProtocolConnect)
	o.Registerer = reg
	o.StaleAfterIntervals = 1000 // one report stays fresh for the whole test
	w1 := dialT(t, fw.addr, o, deps{})
	fs := fw.next(ctx, t)
	fs.register(ctx, t, 60_000, 20_000)
	fs.report(t, healthy("a", 1, 2))
	waitWorker(ctx, t, w1, "fresh", isState(Fresh))
	o.RouterID = "router-b"
	w2 := dialT(t, "http://"+fw.addr, o, deps{})
	if *w1.metrics != *w2.metrics {
		t.Fatal("the second worker did not reuse the registered collectors")
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	hot := map[string]map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "loadreporter_client_worker_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			var worker, state string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "worker":
					worker = l.GetValue()
				case "state":
					state = l.GetValue()
				}
			}
			if hot[worker] == nil {
				hot[worker] = map[string]float64{}
			}
			hot[worker][state] = m.GetGauge().GetValue()
		}
	}
	if len(hot) != 2 || len(hot[fw.addr]) != len(states) {
		t.Fatalf("state series %v", hot)
	}
	for worker, byState := range hot {
		sum := 0.0
		for _, v := range byState {
			sum += v
		}
		if sum != 1 {
			t.Fatalf("%s: state not one-hot: %v", worker, byState)
		}
	}
	if hot[fw.addr]["fresh"] != 1 {
		t.Fatalf("w1 state %v", hot[fw.addr])
	}

	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "loadreporter_client_reconnects_total", Help: "x"}))
	o.Registerer = clash
	if w, err := Dial(fw.addr, o); err == nil {
		_ = w.Close()
		t.Fatal("a clashing collector was accepted")
	}
}
