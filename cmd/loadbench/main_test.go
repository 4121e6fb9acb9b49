package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func TestPhaseSlotsAutoIsOnePhasePerHundredRouters(t *testing.T) {
	t.Parallel()
	slots, err := parseSlots("default, 1, per100")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		routers int
		want    []int
	}{
		{100, []int{defaultSlots, 1}}, // per100 is 1 there: measured once
		{1000, []int{defaultSlots, 1, 10}},
		{10000, []int{defaultSlots, 1, 100}},
		{50000, []int{defaultSlots, 1, 100}}, // loadreporter's bound
		{10, []int{defaultSlots, 1}},
	} {
		if got := scenarioSlots(slots, c.routers); !slices.Equal(got, c.want) {
			t.Errorf("--phase-slots default,1,per100 at %d routers measures %v, want %v", c.routers, got, c.want)
		}
	}
}

func TestPhaseSlotsRefusesWhatLoadreporterRefuses(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"0", "101", "per100,x", "auto", "", "-1"} {
		_, err := parseSlots(bad)
		if err == nil || !strings.Contains(err.Error(), "--phase-slots") {
			t.Errorf("--phase-slots %q: error %v, want one naming the flag", bad, err)
		}
	}
	for _, bad := range []string{"", "orca,orca", "nginx", "orca,"} {
		if _, err := parsePeers(bad); err == nil || !strings.Contains(err.Error(), "--peers") {
			t.Errorf("--peers %q: error %v, want one naming the flag", bad, err)
		}
	}
	if got, err := parsePeers("orca, grpcfanout"); err != nil || !slices.Equal(got, []string{"orca", "grpcfanout"}) {
		t.Errorf("--peers orca,grpcfanout = %v, %v", got, err)
	}
}

// The before peer is an earlier build's binary: asked for without one, or
// one given but not asked for, or one that cannot run (missing, not
// executable: the file's own error, wrapped), is refused before anything
// is measured.
func TestTheBeforePeerNeedsABinary(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notExecutable := filepath.Join(t.TempDir(), "loadbench")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		peers, before, want string
		cause               error // wrapped, when the file is at fault
	}{
		{"orca,before", "", "needs --before", nil},
		{"orca", self, "only with before in --peers", nil},
		{"before", filepath.Join(t.TempDir(), "missing"), "--before", fs.ErrNotExist},
		{"before", notExecutable, "--before", fs.ErrPermission},
	} {
		peers, err := parsePeers(c.peers)
		if err != nil {
			t.Fatalf("--peers %q: %v", c.peers, err)
		}
		err = checkBefore(options{peers: peers, before: c.before})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--peers %s --before %q: error %v, want one saying %q", c.peers, c.before, err, c.want)
		}
		if c.cause != nil && !errors.Is(err, c.cause) {
			t.Errorf("--peers %s --before %q: error %v, want it to wrap %v", c.peers, c.before, err, c.cause)
		}
	}
	peers, _ := parsePeers("orca,before")
	if err := checkBefore(options{peers: peers, before: self}); err != nil {
		t.Errorf("--peers orca,before --before %s: %v", self, err)
	}
}

// The lost-report and late-fire figures come from ours' /metrics; a server
// without them (a peer) prints "—", never a zero it did not measure.
func TestServerCountersReadOursMetricsOnly(t *testing.T) {
	t.Parallel()
	ours := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP loadreporter_reports_dropped_total x\n"+
			`loadreporter_reports_dropped_total{kind="history"} 7`+"\n"+
			`loadreporter_reports_dropped_total{kind="monitor"} 42`+"\n"+
			`loadreporter_fire_lateness_seconds_bucket{le="0.0005"} 90`+"\n"+
			`loadreporter_fire_lateness_seconds_bucket{le="0.001"} 95`+"\n"+
			`loadreporter_fire_lateness_seconds_bucket{le="+Inf"} 100`+"\n"+
			`loadreporter_fire_lateness_seconds_count 100`+"\n")
	}))
	defer ours.Close()
	var peerAsked atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		peerAsked.Add(1)
		http.NotFound(w, nil)
	}))
	defer peer.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	if got := serverCounters("ours", addr(ours)); got != (counters{dropped: 42, fires: 100, firesLate: 5}) {
		t.Errorf("ours: %+v, want the monitor kind's 42 dropped and 5 of 100 fires late", got)
	}
	if got := serverCounters("ours", addr(peer)); got != (counters{-1, -1, -1}) {
		t.Errorf("a server without the counters: %+v, want all -1", got)
	}
	peerAsked.Store(0)
	if got := serverCounters("orca", addr(peer)); got != (counters{-1, -1, -1}) || peerAsked.Load() != 0 {
		t.Errorf("a peer: %+v after %d requests, want all -1 without asking (a gRPC-only peer answers HTTP/1 with SETTINGS)", got, peerAsked.Load())
	}
	for _, kind := range []string{netHTTPRef, beforeRef} { // loadreporter too
		if got := serverCounters(kind, addr(ours)); got != (counters{dropped: 42, fires: 100, firesLate: 5}) {
			t.Errorf("%s: %+v, want its /metrics read as ours are", kind, got)
		}
	}
	if got := counted(40, 42); got != 2 {
		t.Errorf("counted(40, 42) = %d", got)
	}
	if got := counted(-1, 42); got != -1 || cell(float64(got)) != "—" {
		t.Errorf("an unknown reading gives %d, printed %q; want -1, —", got, cell(float64(got)))
	}
	if got := lateShare(result{fires: 200, firesLate: 5}); got != 2.5 {
		t.Errorf("lateShare = %v, want 2.5 (%%)", got)
	}
	if got := lateShare(result{fires: -1, firesLate: -1}); got != -1 {
		t.Errorf("lateShare of a peer = %v, want -1", got)
	}
}

func TestLiveMemoryReadsTheLineAfterACollection(t *testing.T) {
	t.Parallel()
	child := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/memstats" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "as found: heap_inuse 9 heap_alloc 8 stack_inuse 7 sys 6 goroutines 5\n"+
			"after GC: heap_inuse 4000 heap_alloc 3000 stack_inuse 2048 sys 99 goroutines 3\n")
	}))
	defer child.Close()
	m, ok := liveMemory(strings.TrimPrefix(child.URL, "http://"))
	if !ok || m != (memory{heap: 3000, stacks: 2048}) {
		t.Fatalf("liveMemory = %+v, %v; want heap_alloc 3000 and stack_inuse 2048 of the after-GC line", m, ok)
	}
	for _, bad := range []string{"", "as found: heap_alloc 1 stack_inuse 2\n", "after GC: heap_alloc x stack_inuse 2\n", "after GC: heap_alloc 1\n"} {
		if m, ok := parseLiveMemory(bad); ok {
			t.Errorf("parseLiveMemory(%q) = %+v, ok; want not ok", bad, m)
		}
	}
	if got := perStream(1000, 5096, true, 2); got != 2048 {
		t.Errorf("perStream = %v, want 2048", got)
	}
	if got := perStream(1000, 5096, false, 2); got != -1 || cell(kib(got)) != "—" {
		t.Errorf("an unknown reading gives %v, printed %q; want -1, —", got, cell(kib(got)))
	}
	rows := scenarioRows(&scenarioResult{o: options{routers: 1000, interval: 100 * time.Millisecond}, slots: defaultSlots,
		refs: []result{{kind: orcaRef, liveHeap: 10 * 1024, liveStacks: -1, window: time.Second}},
		ours: result{liveHeap: 12 * 1024, liveStacks: 8 * 1024, window: time.Second}})
	found := 0
	for _, r := range rows {
		switch r.name {
		case "  live after a collection: heap":
			found++
			if r.refs[0] != 10 || r.ours != 12 || r.unit != "KiB" {
				t.Errorf("heap row %+v, want 10 and 12 KiB", r)
			}
		case "  live after a collection: stacks":
			found++
			if r.refs[0] != -1 || r.ours != 8 {
				t.Errorf("stacks row %+v, want unknown and 8 KiB", r)
			}
		}
	}
	if found != 2 {
		t.Errorf("%d of the two live-memory rows in the table", found)
	}
}

// pingCounter counts the PING frames (not their acks) a client writes on
// its HTTP/2 connection.
type pingCounter struct {
	net.Conn
	mu      sync.Mutex
	pending []byte // the preface, until it is whole
	preface bool   // passed: later writes are frames
	frames  frameScanner
	pings   *atomic.Int64
}

func (c *pingCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	frames := p
	if !c.preface {
		c.pending = append(c.pending, p...)
		frames = nil
		if len(c.pending) >= len(http2.ClientPreface) {
			frames, c.preface, c.pending = c.pending[len(http2.ClientPreface):], true, nil
		}
	}
	c.frames.feed(frames, func(h frameHeader) {
		if h.typ == http2.FramePing && h.flags&http2.FlagPingAck == 0 {
			c.pings.Add(1)
		}
	})
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func TestClientBDPDecidesWhetherTheClientPings(t *testing.T) {
	t.Parallel()
	for _, bdp := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		stop := serveORCA(ln, &instantEngine{ranks: 8})
		var pings atomic.Int64
		dial := func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return &pingCounter{Conn: c, pings: &pings}, nil
		}
		o := options{clientBDP: bdp, interval: 10 * time.Millisecond, lease: 10 * time.Second}
		cc, err := grpc.NewClient(ln.Addr().String(), append(dialOptions(o), grpc.WithContextDialer(dial))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := openRouter(ctx, cc, "r", o)
		if err != nil {
			t.Fatal(err)
		}
		for range 30 { // the ack, then reports
			if err := st.RecvMsg(&pb.WorkerFrame{}); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		_ = cc.Close()
		_ = stop()
		switch n := pings.Load(); {
		case bdp && n == 0:
			t.Errorf("--client-bdp: no PING in 30 frames; grpc-go's client probes bandwidth by default")
		case !bdp && n != 0:
			t.Errorf("--client-bdp=false: %d PINGs in 30 frames, want none", n)
		}
		if !strings.Contains(clientLabel(o), map[bool]string{true: "probing", false: "without"}[bdp]) {
			t.Errorf("clientLabel(%v) = %q", bdp, clientLabel(o))
		}
	}
}

// TestOneRouterIsHeldToItsOwnTargets: a single router is held to an
// interval error p99 and a first report within 1 ms; a fan-out (100
// routers or more) to the ratio targets instead.
func TestOneRouterIsHeldToItsOwnTargets(t *testing.T) {
	t.Parallel()
	targets := func(routers int, ours result) map[string]string {
		got := map[string]string{}
		sr := &scenarioResult{o: options{routers: routers, interval: 100 * time.Millisecond}, slots: defaultSlots,
			refs: []result{{kind: orcaRef, window: time.Second}}, ours: ours}
		for _, r := range scenarioRows(sr) {
			if r.target != "" {
				got[r.name] = fmt.Sprintf("%s %v", r.target, r.met)
			}
		}
		return got
	}
	good := result{window: time.Second, gaps: 9, intervalErrP99: 900 * time.Microsecond, firstP99: 700 * time.Microsecond}
	one := targets(1, good)
	if one["interval error p99"] != "≤ 1 true" || one["first report after ack p99 (all open)"] != "≤ 1 true" {
		t.Errorf("1 router, within 1 ms: targets %v", one)
	}
	short := good
	short.gaps = 3 // the router heard 4 of its 10 reports
	if one := targets(1, short); one["interval error p99"] != "≤ 1 false" {
		t.Errorf("1 router heard in 4 of 10 intervals: targets %v", one)
	}
	if _, ok := one["worker CPU per delivered report"]; ok {
		t.Errorf("1 router is held to the fan-out CPU target: %v", one)
	}
	late := good
	late.intervalErrP99, late.firstP99 = 1100*time.Microsecond, 2*time.Millisecond
	one = targets(1, late)
	if one["interval error p99"] != "≤ 1 false" || one["first report after ack p99 (all open)"] != "≤ 1 false" {
		t.Errorf("1 router, over 1 ms: targets %v", one)
	}
	for _, n := range []int{100, 1000} {
		fan := targets(n, late)
		if fan["interval error p99"] != "" || fan["first report after ack p99 (all open)"] != "" {
			t.Errorf("%d routers are held to one router's targets: %v", n, fan)
		}
		if _, ok := fan["worker CPU per delivered report"]; !ok {
			t.Errorf("%d routers are not held to the CPU target: %v", n, fan)
		}
	}
}

// The socket clock sees a stream's DATA frame when its last byte is read,
// however the reads split the frames; other frames and empty DATA frames
// are not reports, and a message split over frames counts once.
func TestSocketClockTimesEachStreamsDataFrames(t *testing.T) {
	t.Parallel()
	var wire bytes.Buffer
	fr := http2.NewFramer(&wire, nil)
	write := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var inWindow atomic.Bool
	inWindow.Store(true)
	clock := &socketClock{inWindow: &inWindow, interval: 100 * time.Millisecond}
	c := &timedConn{clock: clock, arrivals: map[uint32][]time.Time{}}
	t0 := time.Unix(1000, 0)
	feed := func(at time.Duration, chunk int) {
		b := wire.Bytes()
		for len(b) > 0 {
			n := min(chunk, len(b))
			c.parse(b[:n], t0.Add(at))
			b = b[n:]
		}
		wire.Reset()
	}

	write(fr.WriteSettings())
	write(fr.WriteData(1, false, bytes.Repeat([]byte{'a'}, 300)))
	write(fr.WriteData(3, false, bytes.Repeat([]byte{'b'}, 40)))
	feed(0, 7) // frames split across reads of 7 bytes
	write(fr.WritePing(false, [8]byte{}))
	write(fr.WriteData(1, false, []byte("half")))
	feed(102*time.Millisecond, 1000)
	write(fr.WriteData(1, false, []byte("and the rest"))) // the same message, 1 ms later
	write(fr.WriteData(3, true, nil))                     // END_STREAM alone: not a report
	feed(103*time.Millisecond, 3)
	write(fr.WriteData(3, false, []byte("late")))
	feed(250*time.Millisecond, 1)
	inWindow.Store(false)
	write(fr.WriteData(1, false, []byte("after the window")))
	feed(300*time.Millisecond, 1000)

	want := map[uint32][]time.Duration{1: {0, 103 * time.Millisecond}, 3: {0, 250 * time.Millisecond}}
	for s, ds := range want {
		got := c.arrivals[s]
		if len(got) != len(ds) {
			t.Fatalf("stream %d: arrivals %v, want at %v", s, got, ds)
		}
		for i, d := range ds {
			if !got[i].Equal(t0.Add(d)) {
				t.Errorf("stream %d arrival %d at %v, want %v", s, i, got[i].Sub(t0), d)
			}
		}
	}
	clock.conns = []*timedConn{c}
	errs := clock.intervalErrors()
	slices.Sort(errs)
	if !slices.Equal(errs, []time.Duration{3 * time.Millisecond, 150 * time.Millisecond}) {
		t.Errorf("interval errors %v, want 3ms (stream 1) and 150ms (stream 3)", errs)
	}
}

// TestFanOutTargetsAreRatiosToTheReferences: each fan-out target is met
// or not by ours against the references measured beside it, at the
// bounds docs/performance.md states, and one against a reference that
// was not run is never met.
func TestFanOutTargetsAreRatiosToTheReferences(t *testing.T) {
	t.Parallel()
	o := options{routers: 1000, interval: 100 * time.Millisecond}
	ref := func(kind string, cpu time.Duration, age time.Duration, rss float64) result {
		return result{kind: kind, cpu: cpu, delivered: 1000, window: time.Second, ageP99: age, rssPerStream: rss}
	}
	orca := ref(orcaRef, 100*time.Millisecond, 10*time.Millisecond, 20*1024) // 100 µs a report
	floor := ref(floorRef, 40*time.Millisecond, 5*time.Millisecond, 10*1024) // 40 µs a report
	verdicts := func(refs []result, ours result) map[string]bool {
		got := map[string]bool{}
		for _, r := range scenarioRows(&scenarioResult{o: o, slots: defaultSlots, refs: refs, ours: ours}) {
			if r.target != "" {
				got[r.name] = r.met
			}
		}
		return got
	}
	for _, c := range []struct {
		name                 string
		cpu, age             time.Duration
		rss                  float64
		cpuMet, ageMet, rMet bool
	}{
		{"within every bound", 60 * time.Millisecond, 10 * time.Millisecond, 24 * 1024, true, true, true},
		{"over 0.7× ORCA's CPU", 71 * time.Millisecond, 9 * time.Millisecond, 20 * 1024, false, true, true},
		{"under 0.7× ORCA's, over 1.5× the floor's", 61 * time.Millisecond, 9 * time.Millisecond, 20 * 1024, false, true, true},
		{"older than ORCA's, more memory than 1.2× its", 50 * time.Millisecond, 11 * time.Millisecond, 25 * 1024, true, false, false},
	} {
		got := verdicts([]result{orca, floor}, ref("ours", c.cpu, c.age, c.rss))
		want := map[string]bool{"worker CPU per delivered report": c.cpuMet, "receipt age p99": c.ageMet, "memory per router stream (RSS)": c.rMet}
		for name, w := range want {
			if m, ok := got[name]; !ok || m != w {
				t.Errorf("%s: %q met %v (held to it: %v), want %v", c.name, name, m, ok, w)
			}
		}
	}
	// Pulls: ten per interval (eleven grid points of each phase fit a
	// window of ten intervals), and one per join probe, at most.
	for _, c := range []struct {
		pulls int64
		met   bool
	}{{110 + 3, true}, {110 + 4, false}} {
		ours := ref("ours", time.Millisecond, time.Millisecond, 1024)
		ours.pulls, ours.probes = c.pulls, 3
		if got := verdicts([]result{orca, floor}, ours)["engine pulls per second"]; got != c.met {
			t.Errorf("%d pulls in a second with 3 joins at 100 ms: met %v, want %v", c.pulls, got, c.met)
		}
	}
	// Without the floor measured, the CPU target cannot be met.
	if got := verdicts([]result{orca}, ref("ours", 10*time.Millisecond, time.Millisecond, 1024)); got["worker CPU per delivered report"] {
		t.Error("the CPU target is met without the floor it is a ratio to")
	}
	var out bytes.Buffer
	sr := &scenarioResult{o: o, slots: defaultSlots, refs: []result{orca, floor}, ours: ref("ours", 60*time.Millisecond, 10*time.Millisecond, 24*1024)}
	printTable(&out, sr)
	for _, want := range []string{"vs orca", "vs grpcfanout", "0.60×", "≤ 0.7× orca, ≤ 1.5× grpcfanout"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestEveryTargetCanFail: each judged row of a fan-out scenario is met by
// a run that does everything right, and not met once the one figure it
// judges goes wrong or could not be read.
func TestEveryTargetCanFail(t *testing.T) {
	t.Parallel()
	o := options{routers: 100, interval: 100 * time.Millisecond}
	orca := result{kind: orcaRef, cpu: 100 * time.Millisecond, delivered: 1000, pulls: 1000, window: time.Second,
		ageP99: 10 * time.Millisecond, rssPerStream: 20 * 1024}
	floor := result{kind: floorRef, cpu: 100 * time.Millisecond, delivered: 1000, pulls: 10, window: time.Second,
		ageP99: 10 * time.Millisecond, rssPerStream: 20 * 1024}
	good := result{kind: "ours", cpu: 60 * time.Millisecond, delivered: 1000, pulls: 11, window: time.Second,
		ageP99: 9 * time.Millisecond, rssPerStream: 20 * 1024, fires: 10, firesLate: 0,
		joins: []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 300 * time.Microsecond}, probes: 3}
	verdicts := func(ours result) map[string]bool {
		got := map[string]bool{}
		for _, r := range scenarioRows(&scenarioResult{o: o, slots: defaultSlots, refs: []result{orca, floor}, ours: ours}) {
			if r.target != "" {
				got[r.name] = r.met
			}
		}
		return got
	}
	all := verdicts(good)
	for name, met := range all {
		if !met {
			t.Errorf("a run that does everything right misses %q", name)
		}
	}
	for _, c := range []struct {
		row    string
		spoil  func(*result)
		reason string
	}{
		{"worker CPU per delivered report", func(r *result) { r.cpu = 80 * time.Millisecond }, "over 0.7× ORCA's though within 1.5× the floor's"},
		{"worker CPU per delivered report", func(r *result) { r.cpu = -1 }, "CPU unread"},
		{"reports delivered per second", func(r *result) { r.delivered = 899 }, "fewer than nine intervals' worth each"},
		{"late reports (gap ≥ 1.5 intervals)", func(r *result) { r.missed = 1 }, "one late"},
		{"engine pulls per second", func(r *result) { r.pulls = 114 }, "over ten per interval and one per probe"},
		{"engine pulls per second", func(r *result) { r.pulls = -1 }, "pulls unread"},
		{"fires started > 1 ms after their deadline", func(r *result) { r.firesLate = 1 }, "10 % late"},
		{"fires started > 1 ms after their deadline", func(r *result) { r.firesLate = -1 }, "lateness unread"},
		{"receipt age p99", func(r *result) { r.ageP99 = 11 * time.Millisecond }, "older than ORCA's"},
		{"receipt age p99", func(r *result) { r.ageP99 = -1 }, "no sample"},
		{"one router joining: worst", func(r *result) { r.joins[2] = 2 * time.Millisecond }, "a join over 1 ms"},
		{"one router joining: worst", func(r *result) { r.probes = 9 }, "six probes without a first report"},
		{"memory per router stream (RSS)", func(r *result) { r.rssPerStream = 25 * 1024 }, "over 1.2× ORCA's"},
		{"memory per router stream (RSS)", func(r *result) { r.rssPerStream = -1 }, "RSS unread"},
		{"leases lost", func(r *result) { r.leaseLost = 1 }, "one lost"},
		{"streams broken", func(r *result) { r.streamErrors = 1 }, "one broken"},
	} {
		if _, ok := all[c.row]; !ok {
			t.Errorf("%q is not judged", c.row)
			continue
		}
		spoilt := good
		spoilt.joins = slices.Clone(good.joins)
		c.spoil(&spoilt)
		if verdicts(spoilt)[c.row] {
			t.Errorf("%q met with %s", c.row, c.reason)
		}
	}
}

// TestSummaryFailsOnlyOnTheShippedConfiguration: make bench fails when
// loadreporter as shipped misses a target, not when a setting tried beside
// it does.
func TestSummaryFailsOnlyOnTheShippedConfiguration(t *testing.T) {
	t.Parallel()
	o := options{routers: 1000, interval: 100 * time.Millisecond, conns: 1}
	var out bytes.Buffer
	rows := []scenarioResult{{o: o, slots: defaultSlots, met: []string{"a"}}, {o: o, slots: 10, unmet: []string{"b"}}}
	if err := printSummary(&out, rows); err != nil || !strings.Contains(out.String(), "every target met") {
		t.Errorf("shipped met all, ours/10 not: %v\n%s", err, out.String())
	}
	rows[0].unmet = []string{"receipt age p99"}
	out.Reset()
	if err := printSummary(&out, rows); !errors.Is(err, errTargetsNotMet) || !strings.Contains(out.String(), "not met: receipt age p99") {
		t.Errorf("shipped missed one: %v\n%s", err, out.String())
	}
}

// TestCollectCountsSilence: a router that went quiet inside the window,
// or heard nothing in it, missed those deadlines.
func TestCollectCountsSilence(t *testing.T) {
	t.Parallel()
	iv := 100 * time.Millisecond
	start := time.Unix(1000, 0)
	end := start.Add(time.Second)
	every := func(from, to time.Duration) *routerStats {
		rs := &routerStats{}
		for d := from; d < to; d += iv {
			rs.arrivals = append(rs.arrivals, start.Add(d))
		}
		return rs
	}
	for _, c := range []struct {
		name string
		rs   *routerStats
		want int64
	}{
		{"on time throughout", every(50*time.Millisecond, time.Second), 0},
		{"silent after 300 ms (deadlines 350 to 950)", every(50*time.Millisecond, 300*time.Millisecond), 7},
		{"heard only from 750 ms (deadlines 50 to 650)", every(750*time.Millisecond, time.Second), 7},
		{"nothing in the window", &routerStats{}, 10},
	} {
		if _, _, _, missed := collect([]*routerStats{c.rs}, iv, start, end); missed != c.want {
			t.Errorf("%s: %d missed, want %d", c.name, missed, c.want)
		}
	}
}
