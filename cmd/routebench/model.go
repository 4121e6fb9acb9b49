package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/forwarded"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// fleet is what a row runs: K engines of the same parameters and R
// routers.
type fleet struct {
	Engines int
	Routers int
	Params  model.Params
	// SnapshotStamps (model mode only) stamps each rank of a report with
	// its engine's snapshot time, as the reporter does with the per-rank
	// timestamp SGLang's /v1/loads and the simulated engine send; false
	// stamps it with the pull, as for an engine that sends none, and the
	// front then has no time to count its requests from.
	SnapshotStamps bool
}

// window says which arrivals a row measures: those in [Warmup,
// Warmup+Measure). Arrivals stop at Warmup+Measure; the measured
// requests still running then may run Drain longer, and one that has not
// got there by then counts as +Inf.
type window struct {
	Warmup, Measure, Drain time.Duration
}

func (w window) end() time.Duration { return w.Warmup + w.Measure }

// The reporter's defaults the model mode copies (loadreporter serve): a
// history session pulls every second whatever else is connected, and a
// poll is answered with the latest report when it is younger than a
// second (--history-interval, --poll-max-age).
const (
	historyInterval = time.Second
	pollMaxAge      = time.Second
	sampleEvery     = 100 * time.Millisecond
)

// result is one row's measurements.
type result struct {
	// TTFT, Queue and E2E are seconds, one per measured request, +Inf
	// for one that never got its first token (TTFT), admission (Queue)
	// or last token (E2E) before the row ended.
	TTFT, Queue, E2E []float64
	// Measured and Served count the measured requests, and those that
	// finished.
	Measured, Served int
	// Dispatched counts the measured requests sent to each worker.
	Dispatched []int
	// Imbalance is max − min over the engines of running + waiting
	// requests, averaged over samples every 100 ms of the measured
	// window.
	Imbalance float64
	// Reads is engine load reads per second per engine over the measured
	// window: reporter pulls, and the oracle's reads of the true state.
	Reads float64
	// Wall is how long the row took to run.
	Wall time.Duration
}

// modelEpoch is the model mode's time zero: a whole second, so the
// millisecond stamps of reports are exact.
var modelEpoch = time.Unix(1_800_000_000, 0)

// vreporter is one engine's loadreporter in virtual time: pulls on the
// aligned grid of its sessions (epoch + k·interval, the epoch its own),
// the latest report kept for polls, the latest pushed one for routers.
type vreporter struct {
	phase    time.Duration
	next     time.Duration
	latest   *pb.LoadReport
	latestAt time.Duration
	pushed   *pb.LoadReport
	// pulled: the engine's loads of the last pull; window paces its
	// pushes on forward, by the fire loop's own rule.
	pulled []model.Load
	window fireloop.Window
}

// sim is one row of the model mode.
type sim struct {
	f       fleet
	pol     policy
	trace   []request
	win     window
	engines []*model.Engine
	ids     [][]int32 // engine request id − 1 → trace index
	routers []*router
	reps    []vreporter
	views   [][]*pb.LoadReport // [router][engine]: polled reports
	pollAt  []time.Duration
	now     time.Duration
	loads   []model.Load
	events  []model.Event

	// per trace request
	worker []int16
	eid    []uint64 // the engine's request id
	disp   []*client.Sent
	ttft   []float64
	queue  []float64
	e2e    []float64
	done   []bool

	left  int // measured requests not finished
	reads int

	// fronts, in the rows whose reporters are the engines' fronts: each
	// front's count of what it passed on (the product's rules); fwd its
	// record of each trace request.
	fronts []forwarded.Ledger
	fwd    []*forwarded.Request
}

// simulate runs one row in virtual time: the model engines, a reporter
// per engine as loadreporter schedules its pulls, and the routers, all
// on one simulated clock.
func simulate(f fleet, pol policy, trace []request, win window, seed uint64) (result, error) {
	start := time.Now()
	s := &sim{f: f, pol: pol, trace: trace, win: win}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for range f.Engines {
		e, err := model.New(f.Params, modelEpoch)
		if err != nil {
			return result{}, err
		}
		s.engines = append(s.engines, e)
	}
	s.ids = make([][]int32, f.Engines)
	for r := range f.Routers {
		s.routers = append(s.routers, newRouter(r, pol, f.Engines, seed))
	}
	if pol.reporter() {
		s.reps = make([]vreporter, f.Engines)
		for k := range s.reps {
			// Each reporter process has its own epoch.
			ph := time.Duration(rng.IntN(int(historyInterval/time.Millisecond))) * time.Millisecond
			s.reps[k] = vreporter{phase: ph, next: ph, window: fireloop.Window{Every: pol.PushOnForward}}
		}
	}
	if pol.Kind == kindPoll {
		s.views = make([][]*pb.LoadReport, f.Routers)
		s.pollAt = make([]time.Duration, f.Routers)
		for r := range s.views {
			s.views[r] = make([]*pb.LoadReport, f.Engines)
			s.pollAt[r] = time.Duration(rng.Int64N(int64(pol.Interval)))
		}
	}
	n := len(trace)
	s.worker = make([]int16, n)
	s.eid = make([]uint64, n)
	s.disp = make([]*client.Sent, n)
	if pol.front() && f.SnapshotStamps {
		s.fronts = make([]forwarded.Ledger, f.Engines)
		s.fwd = make([]*forwarded.Request, n)
	}
	s.ttft, s.queue, s.e2e = infs(n), infs(n), infs(n)
	s.done = make([]bool, n)
	res := result{Dispatched: make([]int, f.Engines)}
	for _, q := range trace {
		if s.measured(q) {
			res.Measured++
		}
	}
	s.left = res.Measured

	end, stop := win.end(), win.end()+win.Drain
	sampleAt := win.Warmup
	var imb float64
	var samples int
	next := 0
	for {
		t := time.Duration(math.MaxInt64)
		if next < n && trace[next].At < end {
			t = trace[next].At
		}
		for k := range s.reps {
			t = min(t, s.reps[k].next)
			if due, ok := s.reps[k].window.Due(); ok {
				t = min(t, due.Sub(modelEpoch))
			}
		}
		for _, p := range s.pollAt {
			t = min(t, p)
		}
		if sampleAt < end {
			t = min(t, sampleAt)
		}
		if t >= end {
			break
		}
		s.advance(t)
		for k := range s.reps {
			if s.reps[k].next == t {
				s.fire(k)
			}
			if due, ok := s.reps[k].window.Due(); ok && due.Sub(modelEpoch) == t {
				s.pushExtra(k)
			}
		}
		for r := range s.pollAt {
			if s.pollAt[r] == t {
				s.poll(r)
			}
		}
		if sampleAt == t {
			imb += float64(s.spread())
			samples++
			sampleAt += sampleEvery
		}
		if next < n && trace[next].At == t {
			if err := s.arrive(next, &res); err != nil {
				return res, err
			}
			next++
		}
	}
	// Drain: no more arrivals; the engines finish what they hold.
	for t := end; s.left > 0 && t < stop; {
		t = min(t+time.Second, stop)
		s.advance(t)
	}
	for i, q := range trace {
		if !s.measured(q) {
			continue
		}
		if !s.done[i] {
			// Still in the engine when the row ended: what it got so far.
			if st, ok := s.engines[s.worker[i]].Request(s.eid[i]); ok {
				if !st.FirstToken.IsZero() {
					s.ttft[i] = st.TTFT().Seconds()
				}
				if !st.Admitted.IsZero() {
					s.queue[i] = st.QueueWait().Seconds()
				}
			}
		}
		res.TTFT = append(res.TTFT, s.ttft[i])
		res.Queue = append(res.Queue, s.queue[i])
		res.E2E = append(res.E2E, s.e2e[i])
		if s.done[i] {
			res.Served++
		}
	}
	if samples > 0 {
		res.Imbalance = imb / float64(samples)
	}
	res.Reads = float64(s.reads) / float64(f.Engines) / win.Measure.Seconds()
	res.Wall = time.Since(start)
	return res, nil
}

func infs(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Inf(1)
	}
	return out
}

func (s *sim) measured(q request) bool { return q.At >= s.win.Warmup && q.At < s.win.end() }

func (s *sim) inWindow(t time.Duration) bool { return t >= s.win.Warmup && t < s.win.end() }

func (s *sim) clock(t time.Duration) time.Time { return modelEpoch.Add(t) }

// advance ends every engine step due by t and hands each finished
// request to its router.
func (s *sim) advance(t time.Duration) {
	s.now = t
	at := s.clock(t)
	for k, e := range s.engines {
		s.events = e.Advance(at, s.events[:0])
		for _, ev := range s.events {
			if ev.Kind == model.EventFinished {
				s.finish(k, ev.Stats)
			}
		}
	}
}

func (s *sim) finish(k int, st model.RequestStats) {
	i := s.ids[k][st.ID-1]
	q := s.trace[i]
	s.routers[q.Router].finished(k, s.disp[i])
	s.disp[i] = nil
	if s.fwd != nil {
		s.fwd[i].Done()
	}
	s.done[i] = true
	if !s.measured(q) {
		return
	}
	s.left--
	if !st.FirstToken.IsZero() {
		s.ttft[i] = st.TTFT().Seconds()
	}
	s.queue[i] = st.QueueWait().Seconds()
	s.e2e[i] = st.E2E().Seconds()
}

// published is engine k's published load snapshot, every rank.
func (s *sim) published(k int) []model.Load {
	e := s.engines[k]
	s.loads = s.loads[:0]
	for r := range e.Params().DPSize {
		s.loads = append(s.loads, e.PublishedAt(r, s.clock(s.now)))
	}
	return s.loads
}

// pull is one reporter pull of engine k now.
func (s *sim) pull(k int) *pb.LoadReport {
	if s.inWindow(s.now) {
		s.reads++
	}
	rep := s.reportNow(k)
	s.reps[k].latest, s.reps[k].latestAt = rep, s.now
	return rep
}

// reportNow is the report of engine k's published snapshot now, with its
// front's count added in the rows that have fronts.
func (s *sim) reportNow(k int) *pb.LoadReport {
	if s.fronts == nil {
		return reportOf(s.published(k), s.clock(s.now), s.f.SnapshotStamps)
	}
	loads := s.published(k)
	if s.reps != nil {
		s.reps[k].pulled = append(s.reps[k].pulled[:0], loads...)
	}
	return s.countedReport(k, loads)
}

// countedReport is the report of loads (a copy it may change) with
// engine k's front's count added.
func (s *sim) countedReport(k int, loads []model.Load) *pb.LoadReport {
	snap := domain.Snapshot{Ranks: make([]domain.RankLoad, len(loads))}
	for i, l := range loads {
		snap.Ranks[i] = domain.RankLoad{SnapshotTime: l.Timestamp, NumWaitingReqs: int64(l.NumWaitingReqs),
			NumWaitingUncachedTokens: l.NumWaitingUncachedTokens, NumTotalTokens: l.NumTotalTokens, NumRunningReqs: int64(l.NumRunningReqs)}
	}
	snap, _ = s.fronts[k].AddTo(snap)
	for i := range loads {
		l := &loads[i]
		l.NumWaitingReqs = int(snap.Ranks[i].NumWaitingReqs)
		l.NumWaitingUncachedTokens, l.NumTotalTokens = snap.Ranks[i].NumWaitingUncachedTokens, snap.Ranks[i].NumTotalTokens
	}
	return reportOf(loads, s.clock(s.now), s.f.SnapshotStamps)
}

// fire is reporter k's fire at its next grid point: one pull, the report
// to the routers when their interval's grid holds the instant.
func (s *sim) fire(k int) {
	v := &s.reps[k]
	t := v.next
	rep := s.pull(k)
	push := s.pol.Kind == kindPush && s.pol.Interval > 0
	if push && (t-v.phase)%s.pol.Interval == 0 {
		v.pushed = rep
		for _, rt := range s.routers {
			rt.observe(k, rep, s.clock(t))
		}
	}
	v.next = nextGrid(t, v.phase, historyInterval)
	if push {
		v.next = min(v.next, nextGrid(t, v.phase, s.pol.Interval))
	}
}

// pushExtra is front k's push on forward now: its last pull with its
// count now.
func (s *sim) pushExtra(k int) {
	v := &s.reps[k]
	v.window.Sent(s.clock(s.now))
	if v.pulled == nil {
		return
	}
	rep := s.countedReport(k, slices.Clone(v.pulled))
	v.pushed = rep
	for _, rt := range s.routers {
		rt.observe(k, rep, s.clock(s.now))
	}
}

// nextGrid is the first point of phase + k·every after t.
func nextGrid(t, phase, every time.Duration) time.Duration {
	return phase + ((t-phase)/every+1)*every
}

// poll is router r's poll of every reporter: the latest report when
// younger than the poll max age, else a pull.
func (s *sim) poll(r int) {
	for k := range s.reps {
		v := &s.reps[k]
		if v.latest != nil && s.now-v.latestAt < pollMaxAge {
			s.views[r][k] = v.latest
		} else {
			s.views[r][k] = s.pull(k)
		}
	}
	s.pollAt[r] += s.pol.Interval
}

// spread is max − min over the engines of running + waiting requests.
func (s *sim) spread() int {
	at := s.clock(s.now)
	qs := make([]int, len(s.engines))
	for k, e := range s.engines {
		for r := range e.Params().DPSize {
			l := e.Live(r, at)
			qs[k] += l.NumRunningReqs + l.NumWaitingReqs
		}
	}
	return spread(qs)
}

func (s *sim) arrive(i int, res *result) error {
	q := s.trace[i]
	at := s.clock(s.now)
	rt := s.routers[q.Router]
	k := rt.pick(at, simSources{s})
	s.disp[i] = rt.sent(k, at, q)
	if s.fronts != nil {
		// The prompt exactly, as the front knows it from a body's
		// Content-Length: one "byte" a token.
		s.fwd[i] = s.fronts[k].Add(at, 1, int64(q.Prompt))
		if s.pol.PushOnForward > 0 && s.pol.Kind == kindPush && s.pol.Interval > 0 {
			if s.reps[k].window.Changed(at) {
				s.pushExtra(k)
			}
		}
	}
	id, err := s.engines[k].Submit(at, model.Request{PromptTokens: q.Prompt, MaxNewTokens: q.Output, Rank: model.AnyRank})
	if err != nil {
		return err
	}
	if int(id) != len(s.ids[k])+1 {
		return fmt.Errorf("engine %d gave request id %d, want %d", k, id, len(s.ids[k])+1)
	}
	s.ids[k] = append(s.ids[k], int32(i))
	s.worker[i], s.eid[i] = int16(k), id
	if s.measured(q) {
		res.Dispatched[k]++
	}
	return nil
}

// simSources is what the model mode's routers read.
type simSources struct{ s *sim }

func (v simSources) live(k int) *pb.LoadReport {
	s := v.s
	if s.inWindow(s.now) {
		s.reads++
	}
	e := s.engines[k]
	at := s.clock(s.now)
	s.loads = s.loads[:0]
	for r := range e.Params().DPSize {
		s.loads = append(s.loads, e.Live(r, at))
	}
	return reportOf(s.loads, at, false)
}

func (v simSources) report(r, k int) *pb.LoadReport {
	s := v.s
	switch {
	case s.pol.Kind == kindPoll:
		return s.views[r][k]
	case s.pol.Interval == 0:
		// A report with every request: the published snapshot now.
		if s.inWindow(s.now) {
			s.reads++
		}
		return s.reportNow(k)
	}
	return s.reps[k].pushed
}

// capacity is how many requests a second one engine completes when it
// never lacks work: requests of w's sizes (from seed) are kept waiting,
// twice as many as the engine may run, so a free slot never idles; the
// completions are counted over span of virtual time after warm of it.
// This is the saturated throughput ρ is a fraction of: below it an
// engine's queue is stable, above it it grows without bound.
func capacity(p model.Params, w sizes, seed uint64, warm, span time.Duration) (float64, error) {
	e, err := model.New(p, modelEpoch)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(seed, 0xca11))
	submit := func(at time.Time) error {
		prompt, output := w.draw(rng)
		_, err := e.Submit(at, model.Request{PromptTokens: prompt, MaxNewTokens: output, Rank: model.AnyRank})
		return err
	}
	for range 2 * p.MaxRunningRequests * p.DPSize {
		if err := submit(modelEpoch); err != nil {
			return 0, err
		}
	}
	var events []model.Event
	done := 0
	for t := time.Duration(0); t < warm+span; {
		t += 100 * time.Millisecond
		events = e.Advance(modelEpoch.Add(t), events[:0])
		for _, ev := range events {
			if ev.Kind != model.EventFinished {
				continue
			}
			if at := ev.At.Sub(modelEpoch); at >= warm && at < warm+span {
				done++
			}
			if err := submit(ev.At); err != nil {
				return 0, err
			}
		}
	}
	return float64(done) / span.Seconds(), nil
}
