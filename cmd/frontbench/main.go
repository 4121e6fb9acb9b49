package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "frontbench:", err)
		stop()
		os.Exit(1)
	}
}

type options struct {
	loadreporter string // the built binary
	nginx        string
	nginxWorkers int
	window       time.Duration // the front's --poll-max-age: /metrics cache window

	clients     int // concurrent clients of the latency rounds
	rounds      int
	postPer     int // requests per client per round
	ssePer      int // streams per client per round
	events      int // events of a streamed /generate
	holdStreams int
	holdEvery   time.Duration
	holdFor     time.Duration
	scrapers    int
	scrapeEvery time.Duration
	scrapeFor   time.Duration
	timeout     time.Duration // bound on the whole run
	cpuProfile  string
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("frontbench", flag.ContinueOnError)
	fs.StringVar(&o.loadreporter, "loadreporter", "bin/loadreporter", "the built loadreporter binary run as the front")
	fs.StringVar(&o.nginx, "nginx", "", "the nginx binary (empty: nginx on PATH, else /usr/sbin/nginx)")
	fs.IntVar(&o.nginxWorkers, "nginx-workers", 2, "nginx's worker_processes (one per core of this machine is what an operator sets)")
	fs.DurationVar(&o.window, "window", time.Second, "the front's --poll-max-age: one engine /metrics scrape serves every scraper for this long")
	fs.IntVar(&o.clients, "clients", 16, "concurrent clients in the latency rounds")
	fs.IntVar(&o.rounds, "rounds", 6, "latency rounds per target, interleaved with the other targets' (order rotated each round)")
	fs.IntVar(&o.postPer, "post", 150, "non-streaming requests (and unary gRPC calls) per client per round")
	fs.IntVar(&o.ssePer, "sse", 12, "SSE streams (and gRPC streams) per client per round")
	fs.IntVar(&o.events, "events", 256, "events of an SSE /generate, and messages of a gRPC stream")
	fs.IntVar(&o.holdStreams, "hold", 1000, "long-lived SSE streams held at once through each proxy")
	fs.DurationVar(&o.holdEvery, "hold-every", time.Second, "between the events of a held stream")
	fs.DurationVar(&o.holdFor, "hold-for", 10*time.Second, "how long all held streams stay open before the last memory sample")
	fs.IntVar(&o.scrapers, "scrapers", 20, "concurrent scrapers of the front's /metrics")
	fs.DurationVar(&o.scrapeEvery, "scrape-every", 50*time.Millisecond, "each scraper's interval")
	fs.DurationVar(&o.scrapeFor, "scrape-for", 5*time.Second, "how long the scrapers run")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on the whole run")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the front over its latency rounds to this file; the front is then this binary serving loadreporter's serve composition (the same code as the binary) with a profiler beside it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"clients", o.clients}, {"rounds", o.rounds}, {"post", o.postPer}, {"sse", o.ssePer}, {"events", o.events},
		{"hold", o.holdStreams}, {"scrapers", o.scrapers}, {"nginx-workers", o.nginxWorkers}} {
		if c.v < 1 {
			return o, fmt.Errorf("--%s %d: want at least 1", c.name, c.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"window", o.window}, {"hold-every", o.holdEvery}, {"hold-for", o.holdFor}, {"scrape-every", o.scrapeEvery},
		{"scrape-for", o.scrapeFor}, {"timeout", o.timeout}} {
		if d.v <= 0 {
			return o, fmt.Errorf("--%s %v: want a positive duration", d.name, d.v)
		}
	}
	if o.holdFor < 2*o.holdEvery {
		return o, fmt.Errorf("--hold-for %v: want at least two --hold-every (%v), to tell live streams from stalled ones", o.holdFor, o.holdEvery)
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "--child-front" {
		return serveFrontChild(ctx, args[1:])
	}
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.nginx, err = findNginx(o.nginx); err != nil {
		return err
	}
	if _, err := os.Stat(o.loadreporter); err != nil && o.cpuProfile == "" {
		return fmt.Errorf("--loadreporter %s: %w (make bench-front builds it)", o.loadreporter, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	date, loadStart := time.Now(), machine.LoadAvg()

	// The engine, in this process.
	eng := newEngine(o.events, o.holdEvery)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: eng, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		close(eng.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	engineAddr := ln.Addr().String()
	// Its gRPC server, on a port of its own.
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gsrv := newGRPCEngine(o.events).server()
	go func() { _ = gsrv.Serve(gln) }()
	defer gsrv.Stop()
	grpcAddr := gln.Addr().String()

	dir, err := os.MkdirTemp("", "frontbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fr, frontBase, err := startFront(ctx, o, "front", engineAddr, "")
	if err != nil {
		return err
	}
	defer fr.stop(10 * time.Second) // the reporter's shutdown grace is 5 s
	// The front of a gRPC engine is a front of its own: it passes every
	// request to the engine's gRPC server.
	frg, grpcFrontBase, err := startFront(ctx, o, "gRPC front", engineAddr, grpcAddr)
	if err != nil {
		return err
	}
	defer frg.stop(10 * time.Second)
	ng, nginxBase, err := startNginx(ctx, o, dir, engineAddr)
	if err != nil {
		return err
	}
	defer ng.stop(5 * time.Second)

	conns := 2 * o.clients
	targets := []*target{
		{name: direct, base: "http://" + engineAddr, client: newClient(conns)},
		{name: front, base: frontBase, proxy: fr, client: newClient(conns)},
		{name: nginx, base: nginxBase, proxy: ng, client: newClient(conns)},
	}
	// One channel per target, shared by the clients, as a router holds
	// one to each worker.
	var grpcTargets []*target
	for _, g := range []struct {
		name, addr string
		proxy      *child
	}{{direct, grpcAddr, nil}, {front, strings.TrimPrefix(grpcFrontBase, "http://"), frg}} {
		cc, err := dialGRPC(g.addr)
		if err != nil {
			return err
		}
		defer cc.Close()
		grpcTargets = append(grpcTargets, &target{name: g.name, base: "grpc://" + g.addr, proxy: g.proxy, conn: cc})
	}
	r := results{o: o, post: map[string]*tally{}, sse: map[string]*tally{}, unary: map[string]*tally{},
		stream: map[string]*tally{}, hold: map[string]holdResult{}}
	for _, t := range targets {
		r.post[t.name], r.sse[t.name] = &tally{}, &tally{}
	}
	for _, t := range grpcTargets {
		r.unary[t.name], r.stream[t.name] = &tally{}, &tally{}
	}
	fmt.Fprintf(os.Stderr, "frontbench: engine %s (gRPC %s), front %s (pid %d), gRPC front %s (pid %d), nginx %s (pid %d); warming up\n",
		engineAddr, grpcAddr, frontBase, fr.pid(), grpcFrontBase, frg.pid(), nginxBase, ng.pid())
	warmUp := func(ts []*target, kinds ...kind) error {
		for _, t := range ts {
			var warm tally
			round(ctx, t, kinds[0], o.clients, 20, o.events, &warm)
			round(ctx, t, kinds[1], o.clients, 2, o.events, &warm)
			if warm.errors > 0 {
				return fmt.Errorf("warming up %s (%s): %d of %d requests failed, the first: %v", t.name, t.base, warm.errors, warm.requests, warm.firstErr)
			}
		}
		return nil
	}
	if err := warmUp(targets, kindPost, kindSSE); err != nil {
		return err
	}
	if err := warmUp(grpcTargets, kindUnary, kindStream); err != nil {
		return err
	}
	// Each round sends every kind to every target of its protocol.
	phases := []struct {
		k       kind
		targets []*target
		per     int
		into    map[string]*tally
	}{
		{kindPost, targets, o.postPer, r.post},
		{kindSSE, targets, o.ssePer, r.sse},
		{kindUnary, grpcTargets, o.postPer, r.unary},
		{kindStream, grpcTargets, o.ssePer, r.stream},
	}
	if o.cpuProfile != "" {
		if err := profileCall(fr.profile, "start", ""); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "frontbench: %d latency rounds\n", o.rounds)
	for i := range o.rounds {
		for _, p := range phases {
			for j := range p.targets {
				t := p.targets[(i+j)%len(p.targets)] // each round starts with the next target
				round(ctx, t, p.k, o.clients, p.per, o.events, p.into[t.name])
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("latency rounds: %w", err)
		}
	}
	if o.cpuProfile != "" {
		if err := profileCall(fr.profile, "stop", o.cpuProfile); err != nil {
			return err
		}
		r.profile = o.cpuProfile
	}
	for _, t := range targets[1:] {
		fmt.Fprintf(os.Stderr, "frontbench: %d streams held through %s\n", o.holdStreams, t.name)
		r.hold[t.name] = hold(ctx, t, eng, holdSteps(o.holdStreams), o.holdFor)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("held streams: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "frontbench: %d scrapers of the front's /metrics\n", o.scrapers)
	r.scrape = scrape(ctx, frontBase, eng, o.scrapers, o.scrapeEvery, o.scrapeFor)
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted, or over --timeout %v: %w", o.timeout, ctx.Err())
	}
	for _, c := range []*child{fr, frg, ng} {
		if done, err := c.exited(); done {
			return fmt.Errorf("%s exited during the run: %v", c.name, err)
		}
	}
	printTable(out, r, header(o, date, loadStart, engineAddr, grpcAddr))
	return nil
}

// header is the lines above the table: when, on what, and how.
func header(o options, date time.Time, loadStart, engine, grpcEngine string) []string {
	frontCmd := o.loadreporter
	if o.cpuProfile != "" {
		frontCmd = "frontbench --child-front (profiling)"
	}
	return []string{
		fmt.Sprintf("frontbench %s — loadreporter's front against the engine direct and %s, one run", date.Format("2006-01-02 15:04:05 MST"), nginxVersion(o.nginx)),
		fmt.Sprintf("machine: %d CPUs, %s; load average %s at the start, %s at the end", runtime.NumCPU(), runtime.Version(), loadStart, machine.LoadAvg()),
		fmt.Sprintf("engine: a stand-in in the bench process on %s (answers at once)", engine),
		fmt.Sprintf("front: %s %s", frontCmd, strings.Join(serveArgs("ENGINE", "127.0.0.1:P", "127.0.0.1:Q", o.window), " ")),
		fmt.Sprintf("gRPC front: the same and %s (a front of its own); gRPC engine: grpc-go in the bench process on %s", strings.Join(grpcFrontArgs("ENGINE_GRPC"), " "), grpcEngine),
		"gRPC client: grpc-go, one channel per target shared by the clients, the same clients and counts as the HTTP rows",
		fmt.Sprintf("nginx: %d workers, HTTP/1.1 upstream keepalive, proxy_buffering and proxy_request_buffering off", o.nginxWorkers),
		fmt.Sprintf("latency: %d rounds, each target in turn (order rotated each round); CPU is utime+stime from /proc over the proxy's own rounds", o.rounds),
	}
}

// findNginx is the nginx binary to run.
func findNginx(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found: install Debian's (tests/services.sh nginx, which make bench-front runs) or give --nginx")
}

// nginxVersion is "nginx 1.22.1", from nginx -v.
func nginxVersion(bin string) string {
	b, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "nginx"
	}
	_, v, ok := strings.Cut(strings.TrimSpace(string(b)), "nginx/")
	if !ok {
		return "nginx"
	}
	return "nginx " + v
}

// profileCall starts or stops the profiling front's CPU profile; stop
// writes it to path.
func profileCall(addr, what, path string) error {
	resp, err := http.Post("http://"+addr+"/"+what, "", nil)
	if err != nil {
		return fmt.Errorf("profile %s: %w", what, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, resp.Body); err != nil {
		return fmt.Errorf("profile %s: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s: %s", what, resp.Status, strings.TrimSpace(b.String()))
	}
	if path != "" {
		return os.WriteFile(path, b.Bytes(), 0o644)
	}
	return nil
}
