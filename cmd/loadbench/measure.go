package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	// Registered, the gzip codec makes every router stream accept gzip, as
	// connect-go clients do by default and tonic routers can: the server then
	// decides what to compress, and pays for it.
	_ "google.golang.org/grpc/encoding/gzip"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// result is what one server did in one scenario's measured window.
type result struct {
	kind           string
	cpu            time.Duration // child CPU over the window; -1: unknown
	delivered      int64
	pulls          int64 // -1: unknown
	window         time.Duration
	rssPerStream   float64 // bytes; -1: unknown (a reading failed, or the RSS fell)
	gaps           int     // intervals measured between two arrivals of one router
	liveHeap       float64 // bytes per stream after a collection; -1: unknown
	liveStacks     float64 // the same for goroutine stacks
	intervalErrP50 time.Duration
	intervalErrP99 time.Duration
	socketErrP50   time.Duration // the same, timed at the client's socket (socketClock)
	socketErrP99   time.Duration
	ageP50, ageP99 time.Duration // receipt − report_time_unix_ms
	firstP50       time.Duration // every router's first report after its ack (all opened at once)
	firstP99       time.Duration
	joins          []time.Duration // probes: one router joining under load, ack to first report
	probes         int             // probes tried; those without a first report are not in joins
	missed         int64           // deadlines without a report: gaps of 1.5 intervals or more, the window's edges included
	dropped        int64           // of them, reports replaced unread (ours' counter); -1: unknown
	fires          int64           // ours' fires in the window, and those that started > 1 ms late; -1: unknown
	firesLate      int64
	leaseLost      int64
	streamErrors   int64
}

// routerStats is one router's record; only its reader writes it, and it is
// read once every reader returned.
type routerStats struct {
	arrivals  []time.Time     // inside the window
	ages      []time.Duration // inside the window
	firstWait time.Duration
}

var monitorDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

func measureServer(ctx context.Context, o options, kind string, slots int) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, addrs, err := startChild(ctx, o, kind, slots)
	if err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	f := strings.Fields(addrs)
	addr, statsAddr := f[0], f[1]
	pid := cmd.Process.Pid
	rssBefore := rss(pid)
	live0, ok0 := liveMemory(statsAddr)

	var tally fleetTally
	socket := &socketClock{inWindow: &tally.inWindow, interval: o.interval}
	conns := make([]*grpc.ClientConn, o.conns)
	for i := range conns {
		conns[i], err = grpc.NewClient(addr, append(dialOptions(o), grpc.WithContextDialer(socket.dial))...)
		if err != nil {
			return result{}, err
		}
		defer conns[i].Close()
	}
	stats := make([]*routerStats, o.routers)
	var wg sync.WaitGroup
	for i := range o.routers {
		stats[i] = &routerStats{}
		st, err := openRouter(ctx, conns[i%len(conns)], fmt.Sprintf("bench-%d", i), o)
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
	profile := ""
	if o.profile != "" && kind == "ours" {
		profile = o.profile
		if slots != defaultSlots {
			profile = fmt.Sprintf("%s.slots%d", o.profile, slots)
		}
		saveMemory(statsAddr, profile) // it collects garbage: before the window
	}
	cpu0, pulls0, counters0 := cpuTime(pid), pulls(statsAddr), serverCounters(kind, addr)
	start := time.Now()
	tally.inWindow.Store(true)
	if profile != "" {
		go saveProfile(statsAddr, o.measure-time.Second, profile) // done before the child stops
	}
	joins, probes := probeJoins(ctx, conns[0], o)
	sleep(ctx, time.Until(start.Add(o.measure)))
	tally.inWindow.Store(false)
	window := time.Since(start)
	cpu1, pulls1, counters1 := cpuTime(pid), pulls(statsAddr), serverCounters(kind, addr)
	live1, ok1 := liveMemory(statsAddr) // it collects garbage: after the window
	if ctx.Err() != nil {
		return result{}, ctx.Err()
	}
	cancel()
	wg.Wait()

	errs, ages, firsts, missed := collect(stats, o.interval, start, start.Add(window))
	socketErrs := socket.intervalErrors()
	cpu := cpu1 - cpu0
	if cpu0 < 0 || cpu1 < 0 {
		cpu = -1
	}
	rssPerStream := float64(rssAfter-rssBefore) / float64(o.routers)
	if rssBefore < 0 || rssAfter < 0 || rssPerStream < 0 {
		rssPerStream = -1
	}
	return result{
		kind: kind, cpu: cpu, delivered: tally.delivered.Load(), pulls: counted(pulls0, pulls1), window: window,
		rssPerStream: rssPerStream, gaps: len(errs),
		liveHeap:       perStream(live0.heap, live1.heap, ok0 && ok1, o.routers),
		liveStacks:     perStream(live0.stacks, live1.stacks, ok0 && ok1, o.routers),
		intervalErrP50: percentile(errs, 50), intervalErrP99: percentile(errs, 99),
		socketErrP50: percentile(socketErrs, 50), socketErrP99: percentile(socketErrs, 99),
		ageP50: percentile(ages, 50), ageP99: percentile(ages, 99),
		firstP50: percentile(firsts, 50), firstP99: percentile(firsts, 99),
		joins: joins, probes: probes, missed: missed, dropped: counted(counters0.dropped, counters1.dropped),
		fires: counted(counters0.fires, counters1.fires), firesLate: counted(counters0.firesLate, counters1.firesLate),
		leaseLost: tally.leaseLost.Load(), streamErrors: tally.streamErrors.Load(),
	}, nil
}

// counted is a counter's growth, or -1 when either reading is unknown.
func counted(before, after int64) int64 {
	if before < 0 || after < 0 {
		return -1
	}
	return after - before
}

// dialOptions are the client's: grpc-go's defaults, or with
// --client-bdp=false windows fixed at HTTP/2's default, which turns off its
// bandwidth probing (a PING, and the server's answer, after data arrives on
// a connection with no probe out: about one per report when each router
// has a connection of its own).
func dialOptions(o options) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if !o.clientBDP {
		opts = append(opts, grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535))
	}
	return opts
}

// clientLabel says in a scenario's header which client measured it.
func clientLabel(o options) string {
	if o.clientBDP {
		return "client probing bandwidth (BDP pings)"
	}
	return "client without BDP pings"
}

// openRouter opens a Monitor stream and registers on it.
func openRouter(ctx context.Context, cc *grpc.ClientConn, id string, o options) (grpc.ClientStream, error) {
	st, err := cc.NewStream(ctx, monitorDesc, loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
	if err != nil {
		return nil, err
	}
	err = st.SendMsg(&pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
		RouterId: id, ReportIntervalMs: o.interval.Milliseconds(), LeaseTtlMs: o.lease.Milliseconds()}}})
	return st, err
}

// probeJoins registers one new router at a time on cc while the fleet is
// measured, about one a second, and returns for each that got a first
// report the time from its ack to it, and how many it tried. Each probe's
// stream is cancelled once it has its first report.
func probeJoins(ctx context.Context, cc *grpc.ClientConn, o options) (joins []time.Duration, tried int) {
	n := max(3, int(o.measure/time.Second)-1)
	every := (o.measure - time.Second) / time.Duration(n)
	for i := range n {
		sleep(ctx, every/2)
		if ctx.Err() != nil {
			break
		}
		tried++
		if d, ok := probeJoin(ctx, cc, fmt.Sprintf("probe-%d", i), o); ok {
			joins = append(joins, d)
		}
		sleep(ctx, every/2)
	}
	return joins, tried
}

func probeJoin(ctx context.Context, cc *grpc.ClientConn, id string, o options) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, max(2*time.Second, 3*o.interval))
	defer cancel()
	st, err := openRouter(ctx, cc, id, o)
	if err != nil {
		return 0, false
	}
	var ackAt time.Time
	for {
		f := new(pb.WorkerFrame)
		if err := st.RecvMsg(f); err != nil {
			return 0, false
		}
		switch f.GetPayload().(type) {
		case *pb.WorkerFrame_Registered:
			ackAt = time.Now()
		case *pb.WorkerFrame_Report:
			if ackAt.IsZero() {
				return 0, false
			}
			return time.Since(ackAt), true
		default:
			return 0, false
		}
	}
}

// fleetTally counts, across every router stream, what the measure window saw.
type fleetTally struct {
	inWindow                           atomic.Bool
	delivered, leaseLost, streamErrors atomic.Int64
}

// read receives one router's frames until its stream ends, keeping its
// arrival times and receipt ages while the window is open and renewing its
// lease.
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
				rs.firstWait = max(now.Sub(ackAt), time.Nanosecond)
			}
			if t.inWindow.Load() {
				t.delivered.Add(1)
				rs.arrivals = append(rs.arrivals, now)
				age := now.Sub(time.UnixMilli(p.Report.GetReportTimeUnixMs()))
				rs.ages = append(rs.ages, age)
			}
		case *pb.WorkerFrame_Error:
			// Any error frame ends the stream: a router that got one
			// (REPLACED, RESOURCE_EXHAUSTED, SHUTTING_DOWN...) lost it.
			if p.Error.GetCode() == "LEASE_EXPIRED" {
				t.leaseLost.Add(1)
			} else if ctx.Err() == nil {
				t.streamErrors.Add(1)
			}
			return
		}
	}
}

// collect returns every gap's distance from the interval, every receipt
// age, each router's wait for its first report after the ack, and how
// many deadlines in the window from start to end went without a report:
// in the gaps of 1.5 intervals or more between two arrivals, and before a
// router's first arrival and after its last (a router that went silent,
// or never heard a report, misses the rest of the window).
func collect(stats []*routerStats, interval time.Duration, start, end time.Time) (errs, ages, firsts []time.Duration, missed int64) {
	missedIn := func(gap time.Duration) int64 {
		if gap < interval*3/2 {
			return 0
		}
		return int64((gap+interval/2)/interval) - 1
	}
	for _, rs := range stats {
		errs = appendIntervalErrors(errs, rs.arrivals, interval)
		if len(rs.arrivals) == 0 {
			missed += int64(end.Sub(start) / interval)
		} else {
			missed += missedIn(rs.arrivals[0].Sub(start)) + missedIn(end.Sub(rs.arrivals[len(rs.arrivals)-1]))
		}
		for i := 1; i < len(rs.arrivals); i++ {
			missed += missedIn(rs.arrivals[i].Sub(rs.arrivals[i-1]))
		}
		ages = append(ages, rs.ages...)
		if rs.firstWait > 0 {
			firsts = append(firsts, rs.firstWait)
		}
	}
	return errs, ages, firsts, missed
}

// appendIntervalErrors appends each gap's distance from the interval
// between one router's consecutive arrivals.
func appendIntervalErrors(errs []time.Duration, arrivals []time.Time, interval time.Duration) []time.Duration {
	for i := 1; i < len(arrivals); i++ {
		d := arrivals[i].Sub(arrivals[i-1]) - interval
		errs = append(errs, max(d, -d))
	}
	return errs
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
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
