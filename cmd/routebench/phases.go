package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

// goalRatio is the bound: push 100 ms with accounting within
// 1.10× the oracle's p99 TTFT.
const goalRatio = 1.10

// burstLen is how long the burst's arrivals exceed capacity.
const burstLen = 10 * time.Second

// burstBase is the utilisation before and after the burst.
const burstBase = 0.85

// summary is a result reduced to the table's columns.
type summary struct {
	TTFT50, TTFT99, Queue99, E2E99 float64 // seconds
	Served, Measured               int
	Jain, Imbalance, Reads         float64
}

func summarize(r result) summary {
	return summary{
		TTFT50: percentile(slices.Clone(r.TTFT), 50), TTFT99: percentile(slices.Clone(r.TTFT), 99),
		Queue99: percentile(slices.Clone(r.Queue), 99), E2E99: percentile(slices.Clone(r.E2E), 99),
		Served: r.Served, Measured: r.Measured, Jain: jain(r.Dispatched), Imbalance: r.Imbalance, Reads: r.Reads,
	}
}

// ms formats seconds as milliseconds.
func ms(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "∞"
	case math.IsNaN(s):
		return "–"
	case s < 0.01:
		return fmt.Sprintf("%.1f", s*1000)
	}
	return fmt.Sprintf("%.0f", s*1000)
}

// secs formats seconds.
func secs(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "∞"
	case math.IsNaN(s):
		return "–"
	}
	return fmt.Sprintf("%.1f", s)
}

// ratio formats v/ref.
func ratio(v, ref float64) string {
	switch {
	case math.IsNaN(v) || math.IsNaN(ref):
		return ""
	case math.IsInf(v, 1) && math.IsInf(ref, 1):
		return "×1"
	case math.IsInf(v, 1) || ref == 0 && v > 0:
		return "×∞"
	case ref == 0:
		return "×1"
	}
	return fmt.Sprintf("×%.2f", v/ref)
}

// table prints rows (indexes into policies) with their results, each
// column beside its ratio to ref (nil: no ratios).
func table(out io.Writer, rows []int, res []result, ref *summary) {
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "way of choosing\tTTFT p50 ms\t\tTTFT p99 ms\t\tqueue p99 ms\t\te2e p99 s\t\tserved\t\tJain\t\timbalance\t\treads/s\t\t")
	for i, row := range rows {
		s := summarize(res[i])
		r := func(v, of float64) string {
			if ref == nil {
				return ""
			}
			return ratio(v, of)
		}
		var rs summary
		if ref != nil {
			rs = *ref
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%.3f\t%s\t%.1f\t%s\t%.1f\t%s\t\n",
			policies[row].Name,
			ms(s.TTFT50), r(s.TTFT50, rs.TTFT50), ms(s.TTFT99), r(s.TTFT99, rs.TTFT99),
			ms(s.Queue99), r(s.Queue99, rs.Queue99), secs(s.E2E99), r(s.E2E99, rs.E2E99),
			s.Served, s.Measured, r(float64(s.Served), float64(rs.Served)),
			s.Jain, r(s.Jain, rs.Jain), s.Imbalance, r(s.Imbalance, rs.Imbalance), s.Reads, r(s.Reads, rs.Reads))
	}
	_ = tw.Flush()
}

// sweepResults are the model mode's rows: [workload][ρ][policy] and
// [workload][policy] for the burst.
type sweepResults struct {
	rhos  []float64
	rho   map[string][][]result
	burst map[string][]result
}

func (b *bench) modelWindow() window {
	return window{Warmup: b.o.modelWarmup, Measure: b.o.modelMeasure, Drain: 300 * time.Second}
}

func (b *bench) burstProfile(w sizes) (profile, window) {
	c := b.cap[w.Name] * float64(b.o.engines)
	return profile{Rate: burstBase * c, BurstAt: b.o.modelWarmup, BurstLen: burstLen, Factor: b.o.burst / burstBase},
		window{Warmup: b.o.modelWarmup, Measure: 60 * time.Second, Drain: 300 * time.Second}
}

// sweep runs every policy at every ρ and through the burst, in virtual
// time, for both workloads, and prints the tables, where the curves part
// and the goal.
func (b *bench) sweep(ctx context.Context) (sweepResults, error) {
	o := b.o
	rhos := slices.Clone(o.rhos)
	if !slices.Contains(rhos, o.rho) {
		rhos = append(rhos, o.rho)
	}
	slices.Sort(rhos)
	sr := sweepResults{rhos: rhos, rho: map[string][][]result{}, burst: map[string][]result{}}
	win := b.modelWindow()
	start := time.Now()
	var fns []func() (result, error)
	for _, w := range workloads {
		for _, rho := range rhos {
			trace := arrivals(o.seed, w, profile{Rate: rho * b.cap[w.Name] * float64(o.engines)}, win.end(), o.routers)
			for _, p := range policies {
				fns = append(fns, func() (result, error) { return simulate(b.fleet, p, trace, win, o.seed) })
			}
		}
		bp, bw := b.burstProfile(w)
		trace := arrivals(o.seed, w, bp, bw.end(), o.routers)
		for _, p := range policies {
			fns = append(fns, func() (result, error) { return simulate(b.fleet, p, trace, bw, o.seed) })
		}
	}
	all, err := runAll(ctx, o.parallel, fns)
	if err != nil {
		return sr, err
	}
	n := len(policies)
	for wi, w := range workloads {
		base := wi * (len(rhos) + 1) * n
		for ri := range rhos {
			sr.rho[w.Name] = append(sr.rho[w.Name], all[base+ri*n:base+(ri+1)*n])
		}
		sr.burst[w.Name] = all[base+len(rhos)*n : base+(len(rhos)+1)*n]
	}
	fmt.Fprintf(b.out, "model mode: %d rows in virtual time, %v of wall time (%d at once)\n\n", len(fns), time.Since(start).Round(100*time.Millisecond), o.parallel)
	every := make([]int, n)
	for i := range every {
		every[i] = i
	}
	for _, w := range workloads {
		ri := slices.Index(rhos, o.rho)
		res := sr.rho[w.Name][ri]
		ref := summarize(res[rowOracle])
		fmt.Fprintf(b.out, "== model mode, workload %s, ρ = %.2f (%.1f requests/s): %v of measured arrivals after %v of virtual time, %d requests; ratios to the oracle (best of 2 on the true state)\n",
			w.Name, o.rho, o.rho*b.cap[w.Name]*float64(o.engines), win.Measure, win.Warmup, res[0].Measured)
		table(b.out, every, res, &ref)
		fmt.Fprintln(b.out)
	}
	for _, w := range workloads {
		b.sweepTable(w, sr)
	}
	b.goalLines(sr)
	if err := b.accountingDetail(ctx, sr); err != nil {
		return sr, err
	}
	return sr, nil
}

// accountingDetail adds to the goal what decides the accounting's
// default: the on/off difference over five arrival streams at the main
// ρ (how much of it is noise), and three what-ifs that say where the gap
// to the oracle comes from: when the engine's numbers were taken (an
// engine without stamps, whose front then counts nothing), how late it
// publishes them (every step), and what the other routers sent (one
// router).
func (b *bench) accountingDetail(ctx context.Context, sr sweepResults) error {
	o := b.o
	win := b.modelWindow()
	const seeds = 5
	pairs := [][2]int{{rowPush100Acct, rowPush100}, {rowPush1sAcct, rowPush1s}}
	unstamped := b.fleet
	unstamped.SnapshotStamps = false
	every := b.fleet
	every.Params.LoadSnapshotPublishInterval = 1
	single := b.fleet
	single.Routers = 1
	whatIfs := []struct {
		name string
		f    fleet
	}{
		{"the engine does not stamp its ranks (no per-rank timestamp in /v1/loads: the front counts nothing, the accounting goes by the pulls)", unstamped},
		{"the engine publishes its load every step (--load-snapshot-publish-interval 1)", every},
		{"one router takes every request (nothing is sent that the router does not count)", single},
	}
	var fns []func() (result, error)
	for _, w := range workloads {
		for s := range uint64(seeds) {
			trace := arrivals(o.seed+1+s, w, profile{Rate: o.rho * b.cap[w.Name] * float64(o.engines)}, win.end(), o.routers)
			for _, pr := range pairs {
				for _, row := range pr {
					fns = append(fns, func() (result, error) { return simulate(b.fleet, policies[row], trace, win, o.seed+1+s) })
				}
			}
		}
		for _, wi := range whatIfs {
			f := wi.f
			for _, rho := range sr.rhos {
				if rho > 0.95 {
					continue
				}
				trace := arrivals(o.seed, w, profile{Rate: rho * b.cap[w.Name] * float64(o.engines)}, win.end(), f.Routers)
				fns = append(fns, func() (result, error) { return simulate(f, policies[rowPush100Acct], trace, win, o.seed) })
			}
			bp, bw := b.burstProfile(w)
			trace := arrivals(o.seed, w, bp, bw.end(), f.Routers)
			fns = append(fns, func() (result, error) { return simulate(f, policies[rowPush100Acct], trace, bw, o.seed) })
		}
	}
	all, err := runAll(ctx, o.parallel, fns)
	if err != nil {
		return err
	}
	b.goal = append(b.goal, fmt.Sprintf("accounting on against off at ρ %.2f over %d more arrival streams (seeds %d to %d), p99 TTFT on ÷ off:", o.rho, seeds, o.seed+1, o.seed+seeds))
	i := 0
	for _, w := range workloads {
		ratios := make([][]float64, len(pairs))
		for range seeds {
			for pi := range pairs {
				ratios[pi] = append(ratios[pi], p99(all[i])/p99(all[i+1]))
				i += 2
			}
		}
		for pi, pr := range pairs {
			rs := ratios[pi]
			var cells []string
			for _, r := range rs {
				cells = append(cells, fmt.Sprintf("×%.2f", r))
			}
			b.goal = append(b.goal, fmt.Sprintf("  workload %-9s %s: %s; mean ×%.3f, accounting lower in %d of %d", w.Name,
				strings.TrimSuffix(policies[pr[1]].Name, ", best of 2"), strings.Join(cells, " "), mean(rs),
				len(slices.DeleteFunc(slices.Clone(rs), func(r float64) bool { return r >= 1 })), len(rs)))
		}
		for _, wi := range whatIfs {
			var cells []string
			for ri, rho := range sr.rhos {
				if rho > 0.95 {
					continue
				}
				cells = append(cells, fmt.Sprintf("%.2f ×%.2f", rho, p99(all[i])/p99(sr.rho[w.Name][ri][rowOracle])))
				i++
			}
			cells = append(cells, fmt.Sprintf("burst ×%.2f", p99(all[i])/p99(sr.burst[w.Name][rowOracle])))
			i++
			b.goal = append(b.goal, fmt.Sprintf("  what-if, workload %s, push 100ms + accounting if %s, ÷ the oracle: %s", w.Name, wi.name, strings.Join(cells, ", ")))
		}
	}
	return nil
}

// sweepTable prints p99 TTFT per policy and ρ, the burst, and where each
// curve parts from the oracle's.
func (b *bench) sweepTable(w sizes, sr sweepResults) {
	_, bw := b.burstProfile(w)
	fmt.Fprintf(b.out, "== ρ sweep, workload %s: p99 TTFT in ms (ratio to the oracle); burst: %.2f then %.1f× capacity for %v, arrivals measured over %v from its start\n",
		w.Name, burstBase, b.o.burst, burstLen, bw.Measure)
	tw := tabwriter.NewWriter(b.out, 0, 0, 1, ' ', tabwriter.AlignRight)
	head := "way of choosing\t"
	for _, rho := range sr.rhos {
		head += fmt.Sprintf("ρ %.2f\t\t", rho)
	}
	fmt.Fprintln(tw, head+"burst\t\t")
	for p := range policies {
		line := policies[p].Name + "\t"
		for ri := range sr.rhos {
			v, ref := p99(sr.rho[w.Name][ri][p]), p99(sr.rho[w.Name][ri][rowOracle])
			line += ms(v) + "\t" + ratio(v, ref) + "\t"
		}
		v, ref := p99(sr.burst[w.Name][p]), p99(sr.burst[w.Name][rowOracle])
		fmt.Fprintln(tw, line+ms(v)+"\t"+ratio(v, ref)+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintf(b.out, "where the curves part (first ρ of the sweep where p99 TTFT passes %.2f× the oracle's):\n", goalRatio)
	for p := range policies {
		if p == rowOracle {
			continue
		}
		parted := -1
		worst, worstAt := 0.0, 0
		for ri := range sr.rhos {
			r := p99(sr.rho[w.Name][ri][p]) / p99(sr.rho[w.Name][ri][rowOracle])
			if r > goalRatio && parted < 0 {
				parted = ri
			}
			if r > worst {
				worst, worstAt = r, ri
			}
		}
		burst := p99(sr.burst[w.Name][p]) / p99(sr.burst[w.Name][rowOracle])
		if parted < 0 {
			fmt.Fprintf(b.out, "  %-34s within %.2f× at every ρ (worst ×%.2f at %.2f); burst ×%.2f\n", policies[p].Name, goalRatio, worst, sr.rhos[worstAt], burst)
			continue
		}
		fmt.Fprintf(b.out, "  %-34s parts at ρ %.2f (×%.2f); worst ×%.2f at %.2f; burst ×%.2f\n", policies[p].Name,
			sr.rhos[parted], p99(sr.rho[w.Name][parted][p])/p99(sr.rho[w.Name][parted][rowOracle]), worst, sr.rhos[worstAt], burst)
	}
	fmt.Fprintln(b.out)
}

func p99(r result) float64 { return percentile(slices.Clone(r.TTFT), 99) }

// goalLines states the goal per workload over the sweep up to 0.95 and
// the burst, with the rows measured beside it, and whether accounting
// wins.
func (b *bench) goalLines(sr sweepResults) {
	b.goal = append(b.goal, fmt.Sprintf("%d engines, %d routers, every ρ of the sweep up to 0.95 and a %v burst at %.1f× capacity: push 100 ms with the router's own accounting within %.2f× the oracle's p99 TTFT (model mode)",
		b.o.engines, b.o.routers, burstLen, b.o.burst, goalRatio))
	ratios := func(w string, p int) ([]float64, []string) {
		var rs []float64
		var cells []string
		for ri, rho := range sr.rhos {
			if rho > 0.95 {
				continue
			}
			r := p99(sr.rho[w][ri][p]) / p99(sr.rho[w][ri][rowOracle])
			rs = append(rs, r)
			cells = append(cells, fmt.Sprintf("%.2f ×%.2f", rho, r))
		}
		r := p99(sr.burst[w][p]) / p99(sr.burst[w][rowOracle])
		rs = append(rs, r)
		cells = append(cells, fmt.Sprintf("burst ×%.2f", r))
		return rs, cells
	}
	for _, w := range workloads {
		for _, p := range []int{rowPush100Acct, rowPush100Fwd} {
			rs, cells := ratios(w.Name, p)
			met := !slices.ContainsFunc(rs, func(r float64) bool { return !(r <= goalRatio) })
			verdict := "NOT MET"
			if met {
				verdict = "met"
			}
			name := "push 100ms + accounting, the defaults"
			if p == rowPush100Fwd {
				name = "the same, --front-push-on-forward " + policies[p].PushOnForward.String()
			}
			b.goal = append(b.goal, fmt.Sprintf("  workload %-9s %-7s %s, p99 TTFT ÷ oracle's: %s", w.Name, verdict+":", name, strings.Join(cells, ", ")))
		}
		for _, p := range []int{rowPush100Side, rowPush100, rowPoll1sB2, rowPoll1sLeast, rowPoll10B2, rowPoll10Least} {
			_, cells := ratios(w.Name, p)
			b.goal = append(b.goal, fmt.Sprintf("    beside it, %-42s %s", policies[p].Name+":", strings.Join(cells, ", ")))
		}
		for _, pair := range [][2]int{{rowPush100Acct, rowPush100}, {rowPush1sAcct, rowPush1s}} {
			on, _ := ratios(w.Name, pair[0])
			off, _ := ratios(w.Name, pair[1])
			better, worse := 0, 0
			var change []float64
			for i := range on {
				switch {
				case on[i] < off[i]:
					better++
				case on[i] > off[i]:
					worse++
				}
				change = append(change, on[i]/off[i]-1)
			}
			b.goal = append(b.goal, fmt.Sprintf("    accounting on against off (%s): p99 TTFT lower at %d of %d points, higher at %d; mean change %+.1f %%",
				strings.TrimSuffix(policies[pair[1]].Name, ", best of 2"), better, len(on), worse, 100*mean(change)))
		}
	}
}

// stalenessIntervals are the x positions of the staleness chart.
var stalenessIntervals = []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second}

// staleness sweeps the report interval (how stale the routers' reports
// get) and writes the chart.
func (b *bench) staleness(ctx context.Context, _ sweepResults) error {
	o := b.o
	w := workloads[0]
	win := b.modelWindow()
	type line struct {
		name, color string
		pol         policy
		everyStep   bool
	}
	lines := []line{
		{"push, best of 2, accounting", "#1f77b4", policy{Kind: kindPush, Choices: 2, Accounting: true}, false},
		{"push, best of 2", "#ff7f0e", policy{Kind: kindPush, Choices: 2}, false},
		{"push, least loaded", "#d62728", policy{Kind: kindPush}, false},
		{"push, best of 2, accounting; engine publishes every step", "#2ca02c", policy{Kind: kindPush, Choices: 2, Accounting: true}, true},
	}
	refs := []struct {
		name, color string
		row         int
	}{{"oracle, best of 2", "#000000", rowOracle}, {"router-local in-flight", "#9467bd", rowLocal}, {"random", "#8c564b", rowRandom}}
	every := b.fleet
	every.Params.LoadSnapshotPublishInterval = 1
	var fns []func() (result, error)
	for _, rho := range o.stalenessRhos {
		trace := arrivals(o.seed, w, profile{Rate: rho * b.cap[w.Name] * float64(o.engines)}, win.end(), o.routers)
		for _, l := range lines {
			for _, iv := range stalenessIntervals {
				p := l.pol
				p.Interval = iv
				f := b.fleet
				if l.everyStep {
					f = every
				}
				fns = append(fns, func() (result, error) { return simulate(f, p, trace, win, o.seed) })
			}
		}
		for _, r := range refs {
			fns = append(fns, func() (result, error) { return simulate(b.fleet, policies[r.row], trace, win, o.seed) })
		}
	}
	start := time.Now()
	all, err := runAll(ctx, o.parallel, fns)
	if err != nil {
		return err
	}
	xs := make([]string, len(stalenessIntervals))
	for i, iv := range stalenessIntervals {
		xs[i] = fmt.Sprint(iv.Milliseconds())
	}
	c := chart{
		Title:  fmt.Sprintf("p99 time to first token against report interval: %d engines, %d routers, workload %s (model mode)", o.engines, o.routers, w.Name),
		XLabel: "report interval, ms (0: the engine's published load read at every request)",
		YLabel: "p99 TTFT",
		X:      xs,
		Note:   fmt.Sprintf("cmd/routebench, seed %d: %v of measured arrivals per point after %v; the engine publishes its load every %d decode steps unless marked", o.seed, win.Measure, win.Warmup, b.fleet.Params.LoadSnapshotPublishInterval),
	}
	per := len(lines)*len(stalenessIntervals) + len(refs)
	fmt.Fprintf(b.out, "== staleness sweep, workload %s: p99 TTFT in ms against the report interval (%d rows, %v of wall time)\n", w.Name, len(fns), time.Since(start).Round(100*time.Millisecond))
	for pi, rho := range o.stalenessRhos {
		res := all[pi*per : (pi+1)*per]
		p := panel{Title: fmt.Sprintf("ρ = %.2f", rho)}
		tw := tabwriter.NewWriter(b.out, 0, 0, 1, ' ', tabwriter.AlignRight)
		head := fmt.Sprintf("ρ %.2f, report interval ms\t", rho)
		for _, x := range xs {
			head += x + "\t"
		}
		fmt.Fprintln(tw, head)
		for li, l := range lines {
			s := series{Name: l.name, Color: l.color}
			row := l.name + "\t"
			for i := range stalenessIntervals {
				v := p99(res[li*len(stalenessIntervals)+i])
				s.Y = append(s.Y, v)
				row += ms(v) + "\t"
			}
			p.Series = append(p.Series, s)
			fmt.Fprintln(tw, row)
		}
		for ri, r := range refs {
			v := p99(res[len(lines)*len(stalenessIntervals)+ri])
			p.Series = append(p.Series, series{Name: r.name, Color: r.color, Flat: true, Y: []float64{v}})
			fmt.Fprintf(tw, "%s (no reports)\t%s\t\n", r.name, ms(v))
		}
		_ = tw.Flush()
		c.Panels = append(c.Panels, p)
	}
	if err := c.write(o.chart); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	fmt.Fprintf(b.out, "chart written to %s\n\n", o.chart)
	return nil
}

// endToEnd runs the chosen rows on the real stack, then the agreement
// check.
func (b *bench) endToEnd(ctx context.Context) error {
	o := b.o
	if len(o.e2eRows) == 0 {
		fmt.Fprintf(b.out, "== end-to-end mode: skipped (--e2e-rows none)\n\n")
		b.checks = append(b.checks, "end-to-end against model: not run (--e2e-rows none)")
		return nil
	}
	w, _ := workloadNamed(o.e2eWorkload)
	rate := o.rho * b.cap[w.Name] * float64(o.engines)
	win := window{Warmup: o.e2eWarmup, Measure: o.e2eMeasure, Drain: o.e2eDrn}
	trace := arrivals(o.seed, w, profile{Rate: rate}, win.end(), o.routers)
	needReporter := slices.ContainsFunc(o.e2eRows, func(i int) bool { return policies[i].reporter() })
	if needReporter {
		if _, err := os.Stat(o.reporter); err != nil {
			return fmt.Errorf("--loadreporter %s: %w (make bench-route builds it)", o.reporter, err)
		}
	}
	setup := e2eSetup{fleet: b.fleet, reporter: o.reporter, seed: o.seed, stream: o.e2eStream, log: b.log}
	how := "chat completions answered once, TTFT and queue wait as the engines timed them, e2e as the routers did"
	if o.e2eStream {
		how = "streamed chat completions, TTFT and e2e as the routers timed them, queue wait as the engines did"
	}
	fmt.Fprintf(b.out, "== end-to-end mode, workload %s, ρ = %.2f (%.1f requests/s): engine-sim HTTP servers on 127.0.0.1, a loadreporter child in front of each (serve --source sglang-http --front-listen, default flags; beside it in the beside row), %d routers in this process; %s; %v of measured arrivals after %v, on the machine's clock; load average %s\n",
		w.Name, o.rho, rate, o.routers, how, win.Measure, win.Warmup, machine.LoadAvg())
	results := make([]result, len(o.e2eRows))
	extras := make([]e2eExtra, len(o.e2eRows))
	for i, row := range o.e2eRows {
		fmt.Fprintf(os.Stderr, "routebench: end-to-end row %d of %d: %s\n", i+1, len(o.e2eRows), policies[row].Name)
		res, ex, err := runE2E(ctx, setup, policies[row], trace, win)
		if err != nil {
			return fmt.Errorf("end-to-end %s: %w", policies[row].Name, err)
		}
		results[i], extras[i] = res, ex
	}
	var ref *summary
	if j := slices.Index(o.e2eRows, rowOracle); j >= 0 {
		s := summarize(results[j])
		ref = &s
	}
	table(b.out, o.e2eRows, results, ref)
	fmt.Fprintf(b.out, "per row: the engines' TTFT, the routers' when streamed, how late the player sent a request (a busy machine shows here first), failed requests, picks without a fresh view:\n")
	tw := tabwriter.NewWriter(b.out, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "way of choosing\tengine TTFT p99 ms\trouter TTFT p99 ms\tsend lag p99 ms\tfailed\tdegraded picks\trow took\t")
	for i, row := range o.e2eRows {
		router := "–"
		if o.e2eStream {
			router = ms(p99(results[i]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%v\t\n", policies[row].Name, ms(percentile(slices.Clone(extras[i].EngineTTFT), 99)),
			router, ms(percentile(slices.Clone(extras[i].Lag), 99)), extras[i].Failed, extras[i].Degraded, results[i].Wall.Round(time.Second))
	}
	_ = tw.Flush()
	fmt.Fprintf(b.out, "load average after the end-to-end rows: %s\n\n", machine.LoadAvg())

	if ref != nil {
		var cells []string
		for i, row := range o.e2eRows {
			if row != rowOracle {
				cells = append(cells, fmt.Sprintf("%s ×%.2f", policies[row].Name, p99(results[i])/ref.TTFT99))
			}
		}
		b.goal = append(b.goal, fmt.Sprintf("end to end, workload %s, ρ %.2f, %v measured: p99 TTFT ÷ the oracle's: %s", w.Name, o.rho, win.Measure, strings.Join(cells, "; ")))
	}
	j := slices.Index(o.e2eRows, rowPush100Acct)
	if j < 0 {
		b.checks = append(b.checks, "end-to-end against model: not run (the push 100ms + accounting row was not among --e2e-rows)")
		return nil
	}
	// The model on the same fleet, arrivals and window; its own draws
	// (the client's are not seeded) taken five ways.
	var fns []func() (result, error)
	for s := range uint64(5) {
		fns = append(fns, func() (result, error) { return simulate(b.fleet, policies[rowPush100Acct], trace, win, o.seed+s) })
	}
	mres, err := runAll(ctx, o.parallel, fns)
	if err != nil {
		return err
	}
	var m []float64
	for _, r := range mres {
		m = append(m, p99(r))
	}
	slices.Sort(m)
	med := m[len(m)/2]
	engine := percentile(slices.Clone(extras[j].EngineTTFT), 99)
	dev := engine/med - 1
	line := fmt.Sprintf("end-to-end against model, push 100ms + accounting, workload %s, ρ %.2f, same fleet, arrivals and window: p99 TTFT %s ms as the engines timed it; model %s ms (median of 5 router seeds, %s to %s): %+.1f %%, within 10 %%: %s",
		w.Name, o.rho, ms(engine), ms(med), ms(m[0]), ms(m[len(m)-1]), 100*dev, okIf(math.Abs(dev) <= 0.10))
	if o.e2eStream {
		router := p99(results[j])
		line += fmt.Sprintf("; as the routers timed it (HTTP and the engine loop's lateness added, which the model leaves out) %s ms, %+.1f %%", ms(router), 100*(router/med-1))
	}
	b.checks = append(b.checks, line)
	return nil
}
