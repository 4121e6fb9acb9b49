package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in /proc.
const clockTicks = 100

type result struct {
	kind           string
	cpu            time.Duration // child CPU over the window
	delivered      int64
	pulls          int64
	window         time.Duration
	rssPerStream   float64 // bytes
	intervalErrP50 time.Duration
	intervalErrP99 time.Duration
	firstP50       time.Duration
	firstP99       time.Duration
	leaseLost      int64
	streamErrors   int64
}

type routerStats struct {
	mu        sync.Mutex
	arrivals  []time.Time // inside the window
	firstWait time.Duration
}

func measureServer(ctx context.Context, o options, kind string) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, addrs, err := startChild(ctx, o, kind)
	if err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	f := strings.Fields(addrs)
	addr, statsAddr := f[0], f[1]
	pid := cmd.Process.Pid
	rssBefore := rss(pid)

	conns := make([]*grpc.ClientConn, o.conns)
	for i := range conns {
		conns[i], err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return result{}, err
		}
		defer conns[i].Close()
	}
	var tally fleetTally
	stats := make([]*routerStats, o.routers)
	var wg sync.WaitGroup
	for i := range o.routers {
		stats[i] = &routerStats{}
		st, err := conns[i%len(conns)].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
			loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
		if err != nil {
			return result{}, err
		}
		err = st.SendMsg(&pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
			RouterId: fmt.Sprintf("bench-%d", i), ReportIntervalMs: o.interval.Milliseconds(), LeaseTtlMs: o.lease.Milliseconds()}}})
		if err != nil {
			return result{}, err
		}
		wg.Add(1)
		go func(rs *routerStats) {
			defer wg.Done()
			tally.read(ctx, st, rs)
		}(stats[i])
	}
	sleep(ctx, o.warmup)
	rssAfter := rss(pid)
	cpu0, pulls0 := cpuTime(pid), pulls(statsAddr)
	start := time.Now()
	tally.inWindow.Store(true)
	if o.profile != "" && kind == "ours" {
		go saveProfile(statsAddr, o.measure-time.Second, o.profile) // done before the child stops
	}
	sleep(ctx, o.measure)
	tally.inWindow.Store(false)
	window := time.Since(start)
	cpu1, pulls1 := cpuTime(pid), pulls(statsAddr)
	if ctx.Err() != nil {
		return result{}, ctx.Err()
	}
	cancel()
	wg.Wait()

	errs, firsts := intervalErrors(stats, o.interval)
	return result{
		kind: kind, cpu: cpu1 - cpu0, delivered: tally.delivered.Load(), pulls: pulls1 - pulls0, window: window,
		rssPerStream:   float64(rssAfter-rssBefore) / float64(o.routers),
		intervalErrP50: percentile(errs, 50), intervalErrP99: percentile(errs, 99),
		firstP50: percentile(firsts, 50), firstP99: percentile(firsts, 99),
		leaseLost: tally.leaseLost.Load(), streamErrors: tally.streamErrors.Load(),
	}, nil
}

// fleetTally counts, across every router stream, what the measure window saw.
type fleetTally struct {
	inWindow                           atomic.Bool
	delivered, leaseLost, streamErrors atomic.Int64
}

// read receives one router's frames until its stream ends, keeping its
// arrival times while the window is open and renewing its lease.
func (t *fleetTally) read(ctx context.Context, st grpc.ClientStream, rs *routerStats) {
	var sendMu sync.Mutex
	var ackAt time.Time
	for {
		f := new(pb.WorkerFrame)
		if err := st.RecvMsg(f); err != nil {
			if ctx.Err() == nil {
				t.streamErrors.Add(1)
			}
			return
		}
		switch p := f.GetPayload().(type) {
		case *pb.WorkerFrame_Registered:
			ackAt = time.Now()
			go keepAlive(ctx, st, &sendMu, time.Duration(p.Registered.GetRenewAfterMs())*time.Millisecond)
		case *pb.WorkerFrame_Report:
			now := time.Now()
			if rs.firstWait == 0 && !ackAt.IsZero() {
				rs.mu.Lock()
				rs.firstWait = max(now.Sub(ackAt), time.Nanosecond)
				rs.mu.Unlock()
			}
			if t.inWindow.Load() {
				t.delivered.Add(1)
				rs.mu.Lock()
				rs.arrivals = append(rs.arrivals, now)
				rs.mu.Unlock()
			}
		case *pb.WorkerFrame_Error:
			if p.Error.GetCode() == "LEASE_EXPIRED" {
				t.leaseLost.Add(1)
			}
			return
		}
	}
}

// intervalErrors returns every gap's distance from the interval, and each
// router's wait for its first report after the ack.
func intervalErrors(stats []*routerStats, interval time.Duration) (errs, firsts []time.Duration) {
	for _, rs := range stats {
		rs.mu.Lock()
		for i := 1; i < len(rs.arrivals); i++ {
			d := rs.arrivals[i].Sub(rs.arrivals[i-1]) - interval
			errs = append(errs, max(d, -d))
		}
		if rs.firstWait > 0 {
			firsts = append(firsts, rs.firstWait)
		}
		rs.mu.Unlock()
	}
	return errs, firsts
}

func keepAlive(ctx context.Context, st grpc.ClientStream, mu *sync.Mutex, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			mu.Lock()
			err := st.SendMsg(&pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}})
			mu.Unlock()
			if err != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)*p/100]
}

// cpuTime is the process's user+system CPU time from /proc/PID/stat.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "(comm) "
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// rss is the process's resident set in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func pulls(statsAddr string) int64 {
	resp, err := http.Get("http://" + statsAddr)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

func printTable(out io.Writer, o options, base, ours result) {
	expected := float64(o.routers) / o.interval.Seconds()
	row := func(name string, b, u float64, unit string, lowerBetter bool) {
		ratio := "—"
		switch {
		case b <= 0 || u <= 0:
		case !lowerBetter:
			ratio = fmt.Sprintf("%.2f× the baseline", u/b)
		case u <= b:
			ratio = fmt.Sprintf("%.1f× less", b/u)
		default:
			ratio = fmt.Sprintf("%.1f× more", u/b)
		}
		fmt.Fprintf(out, "%-34s %14.2f %14.2f  %-8s %s\n", name, b, u, unit, ratio)
	}
	fmt.Fprintf(out, "%-34s %14s %14s\n", "", "baseline", "loadreporter")
	perReport := func(r result) float64 {
		if r.delivered == 0 {
			return 0
		}
		return float64(r.cpu.Microseconds()) / float64(r.delivered)
	}
	row("worker CPU per delivered report", perReport(base), perReport(ours), "µs", true)
	row("worker CPU (share of one core)", base.cpu.Seconds()/base.window.Seconds()*100, ours.cpu.Seconds()/ours.window.Seconds()*100, "%", true)
	row("reports delivered per second", float64(base.delivered)/base.window.Seconds(), float64(ours.delivered)/ours.window.Seconds(), "/s", false)
	fmt.Fprintf(out, "%-34s %14.0f %14.0f  /s\n", "  (expected)", expected, expected)
	row("engine pulls per second", float64(base.pulls)/base.window.Seconds(), float64(ours.pulls)/ours.window.Seconds(), "/s", true)
	row("interval error p50", ms(base.intervalErrP50), ms(ours.intervalErrP50), "ms", true)
	row("interval error p99", ms(base.intervalErrP99), ms(ours.intervalErrP99), "ms", true)
	row("first report after ack p50", ms(base.firstP50), ms(ours.firstP50), "ms", true)
	row("first report after ack p99", ms(base.firstP99), ms(ours.firstP99), "ms", true)
	row("memory per router stream", base.rssPerStream/1024, ours.rssPerStream/1024, "KiB", true)
	fmt.Fprintf(out, "%-34s %14d %14d\n", "leases lost", base.leaseLost, ours.leaseLost)
	fmt.Fprintf(out, "%-34s %14d %14d\n", "streams broken", base.streamErrors, ours.streamErrors)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func saveProfile(statsAddr string, d time.Duration, path string) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", statsAddr, int(d.Seconds())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(path, b, 0o644)
}
