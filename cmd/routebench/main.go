package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
)

// options are the command's flags.
type options struct {
	engines, routers, dp int
	rho                  float64
	rhos                 []float64
	burst                float64
	seed                 uint64
	parallel             int

	modelWarmup, modelMeasure time.Duration
	stalenessRhos             []float64
	chart                     string

	e2eRows                       []int
	e2eStream                     bool
	e2eWorkload                   string
	e2eWarmup, e2eMeasure, e2eDrn time.Duration
	reporter                      string
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("routebench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.engines, "engines", 8, "simulated engines (K)")
	fs.IntVar(&o.routers, "routers", 4, "routers sharing the arrival stream (R)")
	fs.IntVar(&o.dp, "dp-size", 1, "data-parallel ranks per engine")
	fs.Float64Var(&o.rho, "rho", 0.85, "utilisation of the main tables and of the end-to-end rows (share of the fleet's capacity)")
	rhos := fs.String("rhos", "0.5,0.6,0.7,0.8,0.85,0.9,0.95", "utilisations of the model mode's sweep")
	fs.Float64Var(&o.burst, "burst", 1.5, "arrival rate during the 10 s burst, as a multiple of capacity (on a base of 0.85)")
	seed := fs.Uint64("seed", 1, "seed of the arrival stream and of the routers' draws")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "model-mode rows run at once")
	fs.DurationVar(&o.modelWarmup, "model-warmup", 60*time.Second, "model mode: virtual time before the measured arrivals")
	fs.DurationVar(&o.modelMeasure, "model-measure", 300*time.Second, "model mode: virtual time of measured arrivals per row")
	srhos := fs.String("staleness-rhos", "0.85,0.95", "utilisations of the staleness sweep's panels")
	fs.StringVar(&o.chart, "chart", "bin/routebench-staleness.svg", "where the staleness chart is written")
	rows := fs.String("e2e-rows", "oracle,push100-acct,push100", "end-to-end rows: keys separated by commas, all, or none ("+keys()+")")
	fs.BoolVar(&o.e2eStream, "e2e-stream", false, "end-to-end: stream the chat completions, so the routers time the first token themselves; false: one answer per request, TTFT as the engines time it (less CPU on a busy machine)")
	fs.StringVar(&o.e2eWorkload, "e2e-workload", "fixed512", "end-to-end request sizes: fixed512 or lognormal")
	fs.DurationVar(&o.e2eWarmup, "e2e-warmup", 15*time.Second, "end-to-end: arrivals before the measured ones, per row")
	fs.DurationVar(&o.e2eMeasure, "e2e-measure", 30*time.Second, "end-to-end: measured arrivals per row")
	fs.DurationVar(&o.e2eDrn, "e2e-drain", 30*time.Second, "end-to-end: how long the measured requests may run after the arrivals stop")
	fs.StringVar(&o.reporter, "loadreporter", "bin/loadreporter", "the loadreporter binary run beside each engine")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.seed = *seed
	var err error
	if o.rhos, err = floats("--rhos", *rhos); err != nil {
		return o, err
	}
	if o.stalenessRhos, err = floats("--staleness-rhos", *srhos); err != nil {
		return o, err
	}
	if o.e2eRows, err = rowKeys(*rows); err != nil {
		return o, err
	}
	if _, err := workloadNamed(o.e2eWorkload); err != nil {
		return o, fmt.Errorf("--e2e-workload %q: want lognormal or fixed512", o.e2eWorkload)
	}
	switch {
	case o.engines < 2 || o.engines > 256:
		return o, fmt.Errorf("--engines %d: want 2 to 256", o.engines)
	case o.routers < 1 || o.routers > 256:
		return o, fmt.Errorf("--routers %d: want 1 to 256", o.routers)
	case o.dp < 1 || o.dp > model.MaxDPSize:
		return o, fmt.Errorf("--dp-size %d: want 1 to %d", o.dp, model.MaxDPSize)
	case !(o.rho > 0 && o.rho < 1):
		return o, fmt.Errorf("--rho %g: want a utilisation in (0, 1)", o.rho)
	case !(o.burst > 1 && o.burst <= 5):
		return o, fmt.Errorf("--burst %g: want more than 1 (above capacity), at most 5", o.burst)
	case o.parallel < 1:
		return o, fmt.Errorf("--parallel %d: want at least 1", o.parallel)
	case o.modelWarmup < 0 || o.modelMeasure < 10*time.Second:
		return o, errors.New("--model-warmup must not be negative and --model-measure must be at least 10s")
	case o.e2eWarmup < 0 || o.e2eMeasure < 5*time.Second || o.e2eDrn < 0:
		return o, errors.New("--e2e-warmup and --e2e-drain must not be negative and --e2e-measure must be at least 5s")
	}
	for _, r := range append(slices.Clone(o.rhos), o.stalenessRhos...) {
		if !(r > 0 && r < 1.5) {
			return o, fmt.Errorf("utilisation %g: want (0, 1.5)", r)
		}
	}
	return o, nil
}

func floats(flagName, s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q: want numbers separated by commas", flagName, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func keys() string {
	var ks []string
	for _, p := range policies {
		ks = append(ks, p.Key)
	}
	return strings.Join(ks, ", ")
}

func rowKeys(s string) ([]int, error) {
	switch strings.TrimSpace(s) {
	case "none", "":
		return nil, nil
	case "all":
		out := make([]int, len(policies))
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	for k := range strings.SplitSeq(s, ",") {
		i := slices.IndexFunc(policies, func(p policy) bool { return p.Key == strings.TrimSpace(k) })
		if i < 0 {
			return nil, fmt.Errorf("--e2e-rows: unknown row %q; want all, none or some of %s", k, keys())
		}
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "routebench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "routebench:", err)
		os.Exit(1)
	}
}

// bench holds what the phases share.
type bench struct {
	o       options
	out     io.Writer
	log     *slog.Logger
	started time.Time
	fleet   fleet
	cap     map[string]float64 // per engine, by workload
	checks  []string
	goal    []string
}

func run(ctx context.Context, o options, out io.Writer) error {
	b := &bench{o: o, out: out, started: time.Now(), cap: map[string]float64{},
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	p := model.DefaultParams()
	p.DPSize = o.dp
	b.fleet = fleet{Engines: o.engines, Routers: o.routers, Params: p, SnapshotStamps: true}
	fmt.Fprintf(out, "routebench: what fresh load buys a router (docs/performance.md)\n")
	fmt.Fprintf(out, "load average at start: %s (other work on the machine moves the end-to-end figures)\n", machine.LoadAvg())
	fmt.Fprintf(out, "fleet: %d engines × %d rank (Llama-3.1-8B on an A100 80 GB as model.DefaultParams: %d running, %d KV tokens, step %v + %v/seq + %v/1k KV tokens, prefill %v/token, load published every %d decode steps), %d routers, seed %d\n",
		o.engines, o.dp, p.MaxRunningRequests, p.MaxTotalNumTokens, p.StepOverhead, p.DecodePerSeq, p.DecodePer1kKVTokens, p.PrefillPerToken, p.LoadSnapshotPublishInterval, o.routers, o.seed)
	for _, w := range workloads {
		c, err := capacity(p, w, o.seed, 120*time.Second, 600*time.Second)
		if err != nil {
			return err
		}
		b.cap[w.Name] = c
		fmt.Fprintf(out, "workload %s: %s\n  capacity %.2f requests/s an engine, %.1f for the fleet: the completions of one engine kept saturated (a queue of twice its running slots) over 600 s of virtual time after 120 s\n",
			w.Name, w.Desc, c, c*float64(o.engines))
	}
	fmt.Fprintln(out)
	if err := b.supermarket(ctx); err != nil {
		return err
	}
	sweep, err := b.sweep(ctx)
	if err != nil {
		return err
	}
	if err := b.staleness(ctx, sweep); err != nil {
		return err
	}
	if err := b.endToEnd(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "== checks that keep the model honest\n")
	for _, c := range b.checks {
		fmt.Fprintln(out, c)
	}
	fmt.Fprintf(out, "\n== goal, printed, never asserted\n")
	for _, g := range b.goal {
		fmt.Fprintln(out, g)
	}
	fmt.Fprintf(out, "\nload average at end: %s; took %v\n", machine.LoadAvg(), time.Since(b.started).Round(time.Second))
	return nil
}

// runAll runs fns, n at a time, and returns their results in order.
func runAll(ctx context.Context, n int, fns []func() (result, error)) ([]result, error) {
	out := make([]result, len(fns))
	errs := make([]error, len(fns))
	next := make(chan int)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = fns[i]()
			}
		})
	}
	for i := range fns {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

// supermarket checks the queue model against the closed form.
func (b *bench) supermarket(ctx context.Context) error {
	const servers, lambda, arrivals = 1000, 0.9, 4_000_000
	var fns []func() (result, error)
	means := make([]float64, 3)
	for i, d := range []int{1, 2, 3} {
		fns = append(fns, func() (result, error) {
			means[i] = supermarketRun{Servers: servers, Lambda: lambda, Choices: d, Warmup: 1_000_000, Arrivals: arrivals, Seed: b.o.seed}.mean()
			return result{}, nil
		})
	}
	if _, err := runAll(ctx, b.o.parallel, fns); err != nil {
		return err
	}
	b.checks = append(b.checks, fmt.Sprintf("supermarket model: %d M/M/1 FIFO queues, λ = %.1f, exponential service, queue lengths fresh at each arrival, %d arrivals counted after 1 000 000; mean time in system in service times, against the closed form (n → ∞), within 3 %%:",
		servers, lambda, arrivals))
	for i, name := range []string{"random", "best of 2", "best of 3"} {
		want := supermarketLimit(lambda, i+1)
		dev := means[i]/want - 1
		b.checks = append(b.checks, fmt.Sprintf("  %-10s %6.3f, closed form %6.3f: %+5.1f %%  %s", name, means[i], want, 100*dev, okIf(math.Abs(dev) <= 0.03)))
	}
	return nil
}

func okIf(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAILED"
}
