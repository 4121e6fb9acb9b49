package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
	"github.com/loadreporter/loadreporter/domain/session"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

type options struct {
	routers  int
	interval time.Duration
	lease    time.Duration
	warmup   time.Duration
	measure  time.Duration
	conns    int
	ranks    int
	peers    []string // the servers ours is compared with: orca, perstream or grpcfanout
	slots    []int    // loadreporter's --phase-slots, one measurement of ours each; autoSlots: sized per scenario, defaultSlots: as shipped
	suite    bool     // run every scenario of suiteScenarios
	child    string   // internal: run as the server child ("ours", "orca", "perstream" or "grpcfanout")
	profile  string   // write a CPU profile of our server's measured window here
	before   string   // an earlier build's loadbench binary, whose ours is the before peer
	// clientBDP keeps grpc-go's bandwidth probing on the client (a PING
	// after data arrives, as grpc-go and grpcio clients do by default);
	// false fixes the windows, which turns it off, as tonic's default does.
	clientBDP bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	fs.IntVar(&o.routers, "routers", 1000, "router streams to open")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "report interval each router asks for")
	fs.DurationVar(&o.lease, "lease", 10*time.Second, "lease each router asks for (keep-alives at renew_after)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "time after the last stream opened before measuring (at least two intervals)")
	fs.DurationVar(&o.measure, "measure", 10*time.Second, "measured time")
	fs.IntVar(&o.conns, "conns", 1, "HTTP/2 connections the streams are spread over")
	fs.IntVar(&o.ranks, "ranks", 8, "DP ranks of the instant engine")
	peers := fs.String("peers", orcaRef+","+floorRef, "what ours is compared with, comma-separated, each measured in turn: orca (grpc-go server shaped like ORCA's service: the targets' first reference), grpcfanout (a bare grpc-go server sending one encoded report per fire to every stream: the transport's floor, the second), perstream (ORCA's shape on connect and net/http), nethttp (loadreporter with --native-grpc=false: every connection on net/http), before (loadreporter as the --before binary ships it)")
	slots := fs.String("phase-slots", "default", "loadreporter's --phase-slots, comma-separated: ours is measured once for each; default is as shipped (auto), per100 one phase per 100 routers of the scenario (10 at 1 000, 100 at 10 000)")
	fs.BoolVar(&o.suite, "suite", false, "run every scenario (1 and 100 × 100 ms; 1 000 × 100 ms over 1, 10 and 1 000 connections; 10 000 × 1 s over 100) and print the targets met and not")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile of loadreporter's measured window to this file, and its heap profile and memory statistics just before the window to FILE.heap and FILE.mem (with --suite: one set per scenario, suffixed)")
	fs.StringVar(&o.profile, "cpuprofile", "", "the same as --profile")
	fs.BoolVar(&o.clientBDP, "client-bdp", true, "the client probes each connection's bandwidth with a PING after data arrives (grpc-go's and grpcio's default); false fixes its windows at 64 KiB, which turns the probing off (tonic's default)")
	fs.StringVar(&o.before, "before", "", "an earlier build's loadbench binary: with the peer before, its loadreporter as shipped is measured beside this one's (a step's before and after in one run); it must accept this build's --child, --ranks, --routers, --interval and --phase-slots")
	fs.StringVar(&o.child, "child", "", "internal: serve as the child process (ours, orca, grpcfanout or perstream)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.slots, err = parseSlots(*slots); err != nil {
		return err
	}
	if o.child != "" {
		return serveChild(ctx, o)
	}
	if o.peers, err = parsePeers(*peers); err != nil {
		return err
	}
	if err := checkBefore(o); err != nil {
		return err
	}
	fmt.Fprintf(out, "loadbench %s, load average %s\n", time.Now().Format(time.DateTime), machine.LoadAvg())
	scenarios := []options{o}
	if o.suite {
		scenarios = suiteScenarios(o)
	}
	var rows []scenarioResult
	for _, s := range scenarios {
		r, err := runScenario(ctx, out, s)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	if o.suite {
		return printSummary(out, rows)
	}
	return nil
}

// suiteScenarios are the rows of docs/performance.md, and a fleet's shape
// (one connection per router), with o's other flags.
func suiteScenarios(o options) []options {
	shapes := []struct {
		routers, conns int
		interval       time.Duration
	}{
		{1, 1, 100 * time.Millisecond},
		{100, 1, 100 * time.Millisecond},
		{1000, 1, 100 * time.Millisecond},
		{1000, 10, 100 * time.Millisecond},
		{1000, 1000, 100 * time.Millisecond}, // a fleet's shape: one connection per router
		{10000, 100, time.Second},
	}
	var out []options
	for _, s := range shapes {
		c := o
		c.routers, c.conns, c.interval = s.routers, s.conns, s.interval
		if o.profile != "" {
			c.profile = fmt.Sprintf("%s.%dx%v.c%d", o.profile, s.routers, s.interval, s.conns)
		}
		out = append(out, c)
	}
	return out
}

// runScenario measures each peer, then ours once per phase-slot setting,
// and prints each of ours side by side with the peers.
func runScenario(ctx context.Context, out io.Writer, o options) ([]scenarioResult, error) {
	o.warmup = max(o.warmup, 2*o.interval)
	loadBefore := machine.LoadAvg()
	fmt.Fprintf(out, "\n== %d routers × %v, %d ranks, %d connection(s), %s, %v measured after %v warm-up; load %s\n",
		o.routers, o.interval, o.ranks, o.conns, clientLabel(o), o.measure, o.warmup, loadBefore)
	var refs []result
	for _, kind := range o.peers {
		r, err := measureServer(ctx, o, kind, defaultSlots)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		refs = append(refs, r)
	}
	var results []scenarioResult
	for _, n := range scenarioSlots(o.slots, o.routers) {
		ours, err := measureServer(ctx, o, "ours", n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", oursLabel(n), err)
		}
		sr := scenarioResult{o: o, slots: n, refs: refs, ours: ours, loadBefore: loadBefore, loadAfter: machine.LoadAvg()}
		printTable(out, &sr)
		results = append(results, sr)
	}
	return results, nil
}

// autoSlots is per100 in --phase-slots: routersPerPhase routers per phase
// a fire then serves about as many routers whatever the scenario's size;
// defaultSlots for loadreporter as shipped.
const (
	autoSlots       = 0
	defaultSlots    = -1
	routersPerPhase = 100
)

// parsePeers reads --peers.
func parsePeers(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f != orcaRef && f != floorRef && f != "perstream" && f != netHTTPRef && f != beforeRef || slices.Contains(out, f) {
			return nil, fmt.Errorf("--peers %q: want orca, grpcfanout, perstream, nethttp or before, each at most once, separated by commas", s)
		}
		out = append(out, f)
	}
	return out, nil
}

// checkBefore refuses the before peer without --before, and --before
// without the peer or naming no program that can run.
func checkBefore(o options) error {
	asked := slices.Contains(o.peers, beforeRef)
	switch {
	case asked && o.before == "":
		return errors.New("--peers before needs --before, an earlier build's loadbench binary")
	case !asked && o.before != "":
		return fmt.Errorf("--before %q is measured only with before in --peers", o.before)
	case asked:
		if _, err := exec.LookPath(o.before); err != nil {
			return fmt.Errorf("--before %q: %w", o.before, err)
		}
	}
	return nil
}

// parseSlots reads --phase-slots: a comma-separated list of settings
// loadreporter accepts, per100 or default.
func parseSlots(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "per100":
			out = append(out, autoSlots)
			continue
		case "default":
			out = append(out, defaultSlots)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > session.MaxPhaseSlots {
			return nil, fmt.Errorf("--phase-slots %q: want default, per100 or numbers in [1, %d], separated by commas", s, session.MaxPhaseSlots)
		}
		out = append(out, n)
	}
	return out, nil
}

// scenarioSlots resolves per100 for a scenario of routers and drops a
// setting already measured (per100 is 1 at 100 routers).
func scenarioSlots(slots []int, routers int) []int {
	var out []int
	for _, n := range slots {
		if n == autoSlots {
			n = min(max(routers/routersPerPhase, 1), session.MaxPhaseSlots)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// startChild runs this binary as the server and returns its address.
func startChild(ctx context.Context, o options, kind string, slots int) (*exec.Cmd, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	slotsArg := fmt.Sprint(slots)
	if slots == defaultSlots {
		slotsArg = "default"
	}
	if kind == beforeRef { // the earlier build serves as it shipped
		self, kind = o.before, "ours"
	}
	cmd := exec.CommandContext(ctx, self, "--child", kind, "--ranks", fmt.Sprint(o.ranks),
		"--routers", fmt.Sprint(o.routers), "--interval", o.interval.String(), "--phase-slots", slotsArg)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, "", fmt.Errorf("child did not report its address: %w", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		_ = cmd.Process.Kill()
		return nil, "", errors.New("child said " + line)
	}
	return cmd, addr, nil
}
