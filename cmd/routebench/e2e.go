package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// e2eSetup is what the end-to-end mode needs besides a row.
type e2eSetup struct {
	fleet fleet
	// reporter is the loadreporter binary run beside each engine.
	reporter string
	seed     uint64
	// stream sends streamed chat completions, so the router times the
	// first token itself; otherwise one answer per request, and the
	// TTFT is the engine's.
	stream bool
	log    *slog.Logger
}

// e2eExtra is what only the end-to-end mode measures.
type e2eExtra struct {
	// EngineTTFT is the measured requests' TTFT on the engines' own
	// times (arrival at the engine to the end of the step that made the
	// first token), seconds: the client's TTFT without HTTP and without
	// the engine loop's wake-up lateness.
	EngineTTFT []float64
	// Lag is how late the player sent the measured requests, seconds.
	Lag []float64
	// Failed counts measured requests whose HTTP exchange failed.
	Failed int
	// Degraded counts the push rows' picks client.Fleet made with no
	// fresh view (or none at all, then sent to a random engine).
	Degraded int
	// Between counts the reports the fronts sent between the deadlines
	// over the row (loadreporter_reports_between_deadlines_total).
	Between float64
}

// e2eRun is one row of the end-to-end mode, torn down by close.
type e2eRun struct {
	s       e2eSetup
	pol     policy
	engines []*enginesim.Main
	reps    []*child
	fleets  []*client.Fleet
	byAddr  map[string]int
	routers []*router
	rmu     []sync.Mutex
	views   [][]atomic.Pointer[pb.LoadReport]
	http    *http.Client
	reads   atomic.Int64 // oracle reads in the window
	degr    atomic.Int64 // push picks without a fresh view
	inWin   atomic.Bool
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	stats []model.RequestStats // what the engines said, every request
}

// runE2E runs pol on the real stack: engines of package enginesim on
// 127.0.0.1, a loadreporter child beside each when the row reads one,
// and the routers in this process; requests are streamed chat
// completions whose TTFT and end-to-end latency the router measures.
func runE2E(ctx context.Context, s e2eSetup, pol policy, trace []request, win window) (result, e2eExtra, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &e2eRun{s: s, pol: pol, stop: cancel, byAddr: map[string]int{}}
	defer r.close()
	if err := r.start(ctx); err != nil {
		return result{}, e2eExtra{}, err
	}
	return r.play(ctx, trace, win)
}

func (r *e2eRun) start(ctx context.Context) error {
	f := r.s.fleet
	for range f.Engines {
		c := enginesim.DefaultConfig()
		c.Params = f.Params
		c.Listen = "127.0.0.1:0"
		c.Logger = slog.New(slog.DiscardHandler)
		c.RequestDone = func(st model.RequestStats) {
			r.mu.Lock()
			r.stats = append(r.stats, st)
			r.mu.Unlock()
		}
		m, err := enginesim.New(c)
		if err != nil {
			return err
		}
		if err := m.Start(ctx); err != nil {
			return err
		}
		r.engines = append(r.engines, m)
	}
	r.http = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 8192, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
	if r.pol.reporter() {
		r.reps = make([]*child, f.Engines)
		errs := make([]error, f.Engines)
		var wg sync.WaitGroup
		for k, m := range r.engines {
			wg.Go(func() {
				r.reps[k], errs[k] = startReporter(ctx, r.s.reporter, "http://"+m.Addr(), r.pol.front(), r.pol.PushOnForward)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for k, c := range r.reps {
			r.byAddr[c.addr] = k
		}
	}
	for i := range f.Routers {
		r.routers = append(r.routers, newRouter(i, r.pol, f.Engines, r.s.seed))
	}
	r.rmu = make([]sync.Mutex, f.Routers)
	switch r.pol.Kind {
	case kindPush:
		return r.startFleets(ctx)
	case kindPoll:
		return r.startPollers(ctx)
	}
	return nil
}

// startFleets gives each router a client.Fleet over every reporter and
// waits until every view is Fresh.
func (r *e2eRun) startFleets(ctx context.Context) error {
	acct := client.AccountingOff
	if r.pol.Accounting {
		acct = client.AccountingOn
	}
	for i := range r.s.fleet.Routers {
		fl, err := client.NewFleet(client.Options{
			RouterID: fmt.Sprintf("routebench-%d", i), ReportInterval: r.pol.Interval,
			Choices: r.pol.Choices, Accounting: acct,
		})
		if err != nil {
			return err
		}
		r.fleets = append(r.fleets, fl)
		for _, c := range r.reps {
			if err := fl.Add(c.addr); err != nil {
				return err
			}
		}
	}
	wait, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for _, fl := range r.fleets {
		changed, stop := fl.Subscribe()
		for !allFresh(fl) {
			select {
			case <-changed:
			case <-wait.Done():
				stop()
				return fmt.Errorf("the routers' views did not all turn fresh: %w", wait.Err())
			}
		}
		stop()
	}
	return nil
}

func allFresh(fl *client.Fleet) bool {
	for _, v := range fl.Views() {
		if v == nil || v.State != client.Fresh {
			return false
		}
	}
	return true
}

// startPollers starts, per router and reporter, a poller of GET
// /v1/loads every Interval, the first at a random point of the first
// interval; it waits for every poller's first answer.
func (r *e2eRun) startPollers(ctx context.Context) error {
	f := r.s.fleet
	r.views = make([][]atomic.Pointer[pb.LoadReport], f.Routers)
	rng := rand.New(rand.NewPCG(r.s.seed, 0x9011))
	first := make(chan error, f.Routers*f.Engines)
	// Only successes are sent: a poller keeps polling until it has one.
	for i := range r.views {
		r.views[i] = make([]atomic.Pointer[pb.LoadReport], f.Engines)
		for k, c := range r.reps {
			phase := time.Duration(rng.Int64N(int64(r.pol.Interval)))
			r.wg.Go(func() { r.poller(ctx, i, k, c.addr, phase, first) })
		}
	}
	wait, cancel := context.WithTimeout(ctx, r.pol.Interval+15*time.Second)
	defer cancel()
	for range f.Routers * f.Engines {
		select {
		case err := <-first:
			if err != nil {
				return err
			}
		case <-wait.Done():
			return fmt.Errorf("the pollers got no first answer: %w", wait.Err())
		}
	}
	return nil
}

func (r *e2eRun) poller(ctx context.Context, i, k int, addr string, phase time.Duration, first chan<- error) {
	t := time.NewTimer(phase)
	defer t.Stop()
	reported := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(r.pol.Interval)
		// A refused poll (503 while the reporter has no healthy report)
		// keeps the view the poller had, as SMG's does.
		if rep, err := r.pollOnce(ctx, addr); err == nil {
			r.views[i][k].Store(rep)
			if !reported {
				first <- nil
				reported = true
			}
		}
	}
}

// pollOnce reads a reporter's /v1/loads as SMG probes it.
func (r *e2eRun) pollOnce(ctx context.Context, addr string) (*pb.LoadReport, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/loads?include=core", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s/v1/loads: %s %s", addr, resp.Status, b)
	}
	return parseLoads(resp.Body)
}

// parseLoads reads a reporter's /v1/loads answer (pollapi's envelope)
// into a report of its ranks' core keys.
func parseLoads(body io.Reader) (*pb.LoadReport, error) {
	var env pollapi.Envelope
	if err := json.NewDecoder(body).Decode(&env); err != nil {
		return nil, fmt.Errorf("/v1/loads: %w", err)
	}
	rep := &pb.LoadReport{Status: pb.ReportStatus_REPORT_STATUS_HEALTHY}
	for _, l := range env.Loads {
		rep.Ranks = append(rep.Ranks, &pb.RankLoad{
			DpRank: l.DPRank, NumRunningReqs: int64(l.NumRunningReqs), NumWaitingReqs: int64(l.NumWaitingReqs),
			NumWaitingUncachedTokens: int64(l.NumWaitingUncachedTokens), NumUsedTokens: int64(l.NumUsedTokens),
			NumTotalTokens: int64(l.NumTotalTokens), MaxTotalNumTokens: int64(l.MaxTotalNumTokens),
			MaxRunningRequests: int64(l.MaxRunningRequests), TokenUsage: l.TokenUsage,
		})
	}
	return rep, nil
}

// e2eSources is what the end-to-end routers read: the engines in this
// process for the oracle, the polled reports for the pollers.
type e2eSources struct{ r *e2eRun }

func (v e2eSources) live(k int) *pb.LoadReport {
	if v.r.inWin.Load() {
		v.r.reads.Add(1)
	}
	return reportOf(v.r.engines[k].Live(), time.Now(), false)
}

func (v e2eSources) report(i, k int) *pb.LoadReport { return v.r.views[i][k].Load() }

// outcome is what the router saw of one request.
type outcome struct {
	ttft, e2e float64 // seconds; +Inf when it never got there
	failed    bool
}

// play sends the trace on the real clock and measures the window.
func (r *e2eRun) play(ctx context.Context, trace []request, win window) (result, e2eExtra, error) {
	f := r.s.fleet
	res := result{Dispatched: make([]int, f.Engines)}
	var ex e2eExtra
	outs := make([]outcome, len(trace))
	for i := range outs {
		outs[i] = outcome{ttft: math.Inf(1), e2e: math.Inf(1)}
	}
	var measured []int
	for i, q := range trace {
		if q.At >= win.Warmup && q.At < win.end() {
			measured = append(measured, i)
		}
	}
	res.Measured = len(measured)
	reqCtx, cancelReqs := context.WithCancel(ctx)
	defer cancelReqs()
	var inflight sync.WaitGroup
	var left sync.WaitGroup // the measured requests sent and not answered
	isMeasured := func(q request) bool { return q.At >= win.Warmup && q.At < win.end() }

	start := time.Now()
	wallWin := [2]time.Time{start.Add(win.Warmup), start.Add(win.end())}
	var pullsAt [2]float64
	var imb float64
	var samples int
	var watchers sync.WaitGroup
	watchers.Go(func() {
		// The window's edges: reporter pulls are read at both, and the
		// engines' queues sampled every 100 ms in between.
		if !sleepUntil(ctx, wallWin[0]) {
			return
		}
		r.inWin.Store(true)
		pullsAt[0] = r.pulls(ctx)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if !now.Before(wallWin[1]) {
					r.inWin.Store(false)
					pullsAt[1] = r.pulls(ctx)
					return
				}
				qs := make([]int, len(r.engines))
				for k, m := range r.engines {
					for _, l := range m.Live() {
						qs[k] += l.NumRunningReqs + l.NumWaitingReqs
					}
				}
				imb += float64(spread(qs))
				samples++
			}
		}
	})

	var recMu sync.Mutex // res.Dispatched and ex.Lag, from every router
	queues := make([]chan int, f.Routers)
	var routing sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan int, 1024)
		routing.Go(func() {
			for idx := range queues[i] {
				q := trace[idx]
				k, finish := r.pick(i, q)
				if isMeasured(q) {
					left.Add(1)
					recMu.Lock()
					res.Dispatched[k]++
					ex.Lag = append(ex.Lag, time.Since(start.Add(q.At)).Seconds())
					recMu.Unlock()
				}
				inflight.Go(func() {
					outs[idx] = r.send(reqCtx, k, q)
					finish()
					if isMeasured(q) {
						left.Done()
					}
				})
			}
		})
	}
	for idx, q := range trace {
		if q.At >= win.end() {
			break
		}
		if !sleepUntil(ctx, start.Add(q.At)) {
			break
		}
		queues[q.Router] <- idx
	}
	for _, c := range queues {
		close(c)
	}
	routing.Wait()
	drained := make(chan struct{})
	go func() { left.Wait(); close(drained) }()
	timer := time.NewTimer(time.Until(wallWin[1].Add(win.Drain)))
	select {
	case <-drained:
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	cancelReqs()
	inflight.Wait()
	watchers.Wait()
	if err := ctx.Err(); err != nil {
		return res, ex, err
	}
	// The engines' handlers take their unfinished requests out once the
	// routers have gone, and only then report them.
	r.quiesce(ctx, 10*time.Second)
	for _, i := range measured {
		o := outs[i]
		res.TTFT = append(res.TTFT, o.ttft)
		res.E2E = append(res.E2E, o.e2e)
		if !math.IsInf(o.e2e, 1) {
			res.Served++
		}
		if o.failed {
			ex.Failed++
		}
	}
	r.mu.Lock()
	for _, st := range r.stats {
		if st.Arrival.Before(wallWin[0]) || !st.Arrival.Before(wallWin[1]) {
			continue
		}
		q, ttft := math.Inf(1), math.Inf(1)
		if !st.Admitted.IsZero() {
			q = st.QueueWait().Seconds()
		}
		if !st.FirstToken.IsZero() {
			ttft = st.TTFT().Seconds()
		}
		res.Queue = append(res.Queue, q)
		ex.EngineTTFT = append(ex.EngineTTFT, ttft)
	}
	r.mu.Unlock()
	if !r.s.stream {
		// The router saw no first token: the table's TTFT is the engines'.
		res.TTFT = slices.Clone(ex.EngineTTFT)
	}
	if samples > 0 {
		res.Imbalance = imb / float64(samples)
	}
	span := win.Measure.Seconds()
	switch {
	case r.pol.Kind == kindOracle:
		res.Reads = float64(r.reads.Load()) / float64(f.Engines) / span
	case r.pol.reporter():
		res.Reads = (pullsAt[1] - pullsAt[0]) / float64(f.Engines) / span
	}
	ex.Degraded = int(r.degr.Load())
	if r.pol.PushOnForward > 0 {
		ex.Between = r.between(ctx)
	}
	res.Wall = time.Since(start)
	return res, ex, nil
}

// quiesce waits, at most bound, until no engine holds a request.
func (r *e2eRun) quiesce(ctx context.Context, bound time.Duration) {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := 0
		for _, m := range r.engines {
			for _, l := range m.Live() {
				busy += l.NumRunningReqs + l.NumWaitingReqs
			}
		}
		if busy == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			r.s.log.Warn("engines still hold requests after the routers went; their stats are missing", "requests", busy)
			return
		case <-ctx.Done():
			return
		}
	}
}

// pick chooses the worker for q on router i and returns what to call
// when the request ends.
func (r *e2eRun) pick(i int, q request) (int, func()) {
	if r.pol.Kind == kindPush {
		res := r.fleets[i].PickFor(q.clientRequest(), 1)
		if res.Degraded || len(res.Picks) == 0 {
			r.degr.Add(1)
		}
		if len(res.Picks) == 0 {
			// No worker to pick from: any engine, counted as degraded.
			r.rmu[i].Lock()
			defer r.rmu[i].Unlock()
			return r.routers[i].rng.IntN(len(r.engines)), func() {}
		}
		return r.byAddr[res.Picks[0].Worker.Addr()], res.Dispatch.Done
	}
	rt := r.routers[i]
	r.rmu[i].Lock()
	defer r.rmu[i].Unlock()
	now := time.Now()
	k := rt.pick(now, e2eSources{r})
	d := rt.sent(k, now, q)
	return k, func() {
		r.rmu[i].Lock()
		rt.finished(k, d)
		r.rmu[i].Unlock()
	}
}

// filler is prompt text: four characters a token.
var filler = strings.Repeat("abcd", maxPrompt)

// Llama 3's chat template as the simulated engine counts it: 1 token to
// begin, 4 per message, 4 for the assistant's header.
const chatTemplateTokens = 1 + 4 + 4

// workerAddr is where requests for engine k go: its front in the rows
// that have fronts, else the engine itself.
func (r *e2eRun) workerAddr(k int) string {
	if r.pol.front() {
		return r.reps[k].frontAddr
	}
	return r.engines[k].Addr()
}

// send streams q from engine k as a chat completion: the first event
// carries the role, each after it one token.
func (r *e2eRun) send(ctx context.Context, k int, q request) outcome {
	out := outcome{ttft: math.Inf(1), e2e: math.Inf(1)}
	body, _ := json.Marshal(map[string]any{
		"model":      "default",
		"messages":   []map[string]string{{"role": "user", "content": filler[:4*(q.Prompt-chatTemplateTokens)]}},
		"max_tokens": q.Output, "stream": r.s.stream,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.workerAddr(k)+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		out.failed = true
		return out
	}
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := r.http.Do(req)
	if err != nil {
		out.failed = ctx.Err() == nil
		return out
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out.failed = true
		return out
	}
	if !r.s.stream {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			out.failed = ctx.Err() == nil
			return out
		}
		out.e2e = time.Since(sent).Seconds()
		return out
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	events := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			out.failed = ctx.Err() == nil && !errors.Is(err, io.EOF)
			return out
		}
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		events++
		switch {
		case events == 2:
			out.ttft = time.Since(sent).Seconds()
		case bytes.HasPrefix(line, []byte("data: [DONE]")):
			out.e2e = time.Since(sent).Seconds()
			return out
		}
	}
}

// pulls is the reporters' engine pulls so far (loadreporter_pulls_total,
// every outcome).
func (r *e2eRun) pulls(ctx context.Context) float64 {
	var sum float64
	for _, c := range r.reps {
		n, err := r.scrapePulls(ctx, c.addr)
		if err != nil {
			r.s.log.Warn("reading a reporter's pulls", "reporter", c.addr, "err", err)
		}
		sum += n
	}
	return sum
}

func (r *e2eRun) scrapePulls(ctx context.Context, addr string) (float64, error) {
	return r.scrapeSum(ctx, addr, "loadreporter_pulls_total")
}

// scrapeSum is the sum of the series of the counter family name on the
// reporter at addr (0 when it has none).
func (r *e2eRun) scrapeSum(ctx context.Context, addr, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum, nil
}

// between is the reports the fronts sent between the deadlines so far.
func (r *e2eRun) between(ctx context.Context) float64 {
	var sum float64
	for _, c := range r.reps {
		n, err := r.scrapeSum(ctx, c.addr, "loadreporter_reports_between_deadlines_total")
		if err != nil {
			r.s.log.Warn("reading a reporter's reports between deadlines", "reporter", c.addr, "err", err)
		}
		sum += n
	}
	return sum
}

// close stops everything the row started, children first.
func (r *e2eRun) close() {
	r.stop()
	for _, fl := range r.fleets {
		_ = fl.Close()
	}
	r.wg.Wait()
	var wg sync.WaitGroup
	for _, c := range r.reps {
		if c != nil {
			wg.Go(c.stop)
		}
	}
	wg.Wait()
	for _, m := range r.engines {
		_ = m.Close()
	}
	if r.http != nil {
		r.http.CloseIdleConnections()
	}
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// child is a loadreporter process.
type child struct {
	cmd  *exec.Cmd
	addr string
	// frontAddr is the worker's address it serves in front of the engine
	// (empty: none).
	frontAddr string
	exited    chan struct{}
	tail      *tailBuffer
}

// startReporter runs `loadreporter serve --source sglang-http
// --engine-url engine --listen 127.0.0.1:0`, with `--front-listen
// 127.0.0.1:0` when front is set (and `--front-push-on-forward` when
// pushOnForward is positive), every other flag at its default, and
// returns once it says where it serves. The child gets SIGTERM should
// this process die first.
func startReporter(ctx context.Context, bin, engine string, front bool, pushOnForward time.Duration) (*child, error) {
	args := []string{"serve", "--source", "sglang-http", "--engine-url", engine, "--listen", "127.0.0.1:0"}
	if front {
		args = append(args, "--front-listen", "127.0.0.1:0")
		if pushOnForward > 0 {
			args = append(args, "--front-push-on-forward", pushOnForward.String())
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{}), tail: &tailBuffer{}}
	addrc := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var addrs [2]string // the reporter's, the front's
		found := false
		for sc.Scan() {
			line := sc.Text()
			c.tail.add(line)
			if found {
				continue
			}
			for i, msg := range []string{`msg="loadreporter serving"`, `msg="front serving the worker's address"`} {
				if strings.Contains(line, msg) {
					addrs[i] = addrField(line)
				}
			}
			if addrs[0] != "" && (!front || addrs[1] != "") {
				found = true
				addrc <- addrs
			}
		}
		_ = cmd.Wait()
		close(c.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	select {
	case addrs := <-addrc:
		c.addr, c.frontAddr = addrs[0], addrs[1]
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before serving: %s", bin, c.tail.String())
	case <-ctx.Done():
		c.stop()
		return nil, fmt.Errorf("%s did not say where it serves: %w; it said: %s", bin, ctx.Err(), c.tail.String())
	}
}

// addrField is the value of a log line's addr= field.
func addrField(line string) string {
	for _, f := range strings.Fields(line) {
		if a, ok := strings.CutPrefix(f, "addr="); ok {
			return a
		}
	}
	return ""
}

// stop interrupts the child, and kills it if it is still there after 10 s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// tailBuffer keeps a child's last lines of log for an error message.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailBuffer) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 20 {
		t.lines = t.lines[1:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
