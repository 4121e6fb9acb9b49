package client

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// Fleet watches many workers with one Options and picks among them. Add
// and Remove may run at any time; Pick and Views read without blocking
// on them. Picks (Pick, PickFor, Dispatch) take turns, so each counts the
// dispatches of the one before; Dispatch.Done does not take a turn.
type Fleet struct {
	opts Options
	deps deps

	mu      sync.Mutex // serialises Add, Remove and Close
	closed  bool
	workers atomic.Pointer[[]*Worker] // sorted by address, never modified

	// pickMu serialises picks: each sees the dispatches of the one
	// before, so a burst of concurrent picks spreads as a sequence would.
	pickMu sync.Mutex
	rnd    *rand.Rand // guarded by pickMu

	changes latest[struct{}]
}

// NewFleet returns an empty Fleet whose workers all use opts (one
// RouterID for the whole fleet is what a router wants: it is per worker).
func NewFleet(opts Options) (*Fleet, error) {
	return newFleet(opts, deps{}, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
}

func newFleet(opts Options, d deps, rnd *rand.Rand) (*Fleet, error) {
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	d = d.withDefaults()
	if d.metrics == nil && o.Registerer != nil {
		if d.metrics, err = newMetrics(o.Registerer); err != nil {
			return nil, err
		}
	}
	f := &Fleet{opts: o, deps: d, rnd: rnd}
	f.deps.published = f.notify
	f.deps.countDispatches = o.Accounting == AccountingOn
	f.workers.Store(new([]*Worker{}))
	return f, nil
}

// Subscribe returns a channel that signals a change in the fleet: a new
// view of any worker (see Worker.Subscribe: a report, a state change), or
// a worker added or removed. Signals coalesce (the channel holds one), so
// read Views after each; one is pending at once, for the fleet as it is.
// A slow reader never delays a Worker. The channel is closed when the
// Fleet is closed or cancel is called.
func (f *Fleet) Subscribe() (changed <-chan struct{}, cancel func()) {
	return f.changes.add(func() (struct{}, bool) { return struct{}{}, true })
}

// Add dials the worker at addr; an address already in the fleet, under
// any spelling ("h:p" and "http://h:p" are one worker), is an error.
func (f *Fleet) Add(addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("client: fleet closed")
	}
	cur := *f.workers.Load()
	i, found := slices.BinarySearchFunc(cur, addr, func(w *Worker, a string) int { return strings.Compare(w.addr, a) })
	if found {
		return fmt.Errorf("client: worker %s is already in the fleet", addr)
	}
	// One worker under two spellings ("h:p", "http://h:p") would register
	// the fleet's router_id twice and the streams replace each other for
	// ever.
	url := baseURL(addr, f.opts)
	if j := slices.IndexFunc(cur, func(w *Worker) bool { return baseURL(w.addr, f.opts) == url }); j >= 0 {
		return fmt.Errorf("client: worker %s is already in the fleet as %s", addr, cur[j].addr)
	}
	w, err := dial(addr, f.opts, f.deps)
	if err != nil {
		return err
	}
	next := slices.Insert(slices.Clone(cur), i, w)
	f.workers.Store(&next)
	f.notify()
	return nil
}

// Remove closes and forgets the worker at addr; false when it was not in
// the fleet.
func (f *Fleet) Remove(addr string) bool {
	f.mu.Lock()
	cur := *f.workers.Load()
	i := slices.IndexFunc(cur, func(w *Worker) bool { return w.addr == addr })
	if i < 0 {
		f.mu.Unlock()
		return false
	}
	w := cur[i]
	next := slices.Delete(slices.Clone(cur), i, i+1)
	f.workers.Store(&next)
	f.mu.Unlock()
	w.forgetPending()
	f.notify()
	_ = w.Close()
	return true
}

// forgetPending drops what the fleet counted for w, which has left it.
func (w *Worker) forgetPending() {
	if w.pending != nil {
		w.pending.close()
	}
}

// Worker is the worker at addr, or nil.
func (f *Fleet) Worker(addr string) *Worker {
	ws := *f.workers.Load()
	if i, found := slices.BinarySearchFunc(ws, addr, func(w *Worker, a string) int { return strings.Compare(w.addr, a) }); found {
		return ws[i]
	}
	return nil
}

// Workers are the fleet's workers, sorted by address.
func (f *Fleet) Workers() []*Worker { return slices.Clone(*f.workers.Load()) }

// Views are the workers' latest views, sorted by address; Standings pair
// each with what the router sent that worker since its view's report.
func (f *Fleet) Views() []*View {
	ws := *f.workers.Load()
	vs := make([]*View, len(ws))
	for i, w := range ws {
		vs[i] = w.View()
	}
	return vs
}

// Standing is one worker as a dashboard shows it: its latest view, and
// what this fleet's router sent it that the view's report does not count
// yet.
type Standing struct {
	View    *View
	Pending Pending
}

// Standings are every worker's Standing, sorted by address.
func (f *Fleet) Standings() []Standing {
	ws := *f.workers.Load()
	out := make([]Standing, len(ws))
	for i, w := range ws {
		out[i] = Standing{View: w.View(), Pending: w.Pending()}
	}
	return out
}

// Close closes every worker; the fleet then takes no more.
func (f *Fleet) Close() error {
	f.mu.Lock()
	f.closed = true
	ws := *f.workers.Load()
	f.workers.Store(new([]*Worker{}))
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		w.forgetPending()
		wg.Go(func() { _ = w.Close() })
	}
	wg.Wait()
	f.changes.close()
	return nil
}

// Pick is one chosen worker.
type Pick struct {
	// Worker is the chosen worker.
	Worker *Worker
	// View is the view it was chosen on.
	View *View
	// Pending is what the router had sent the worker that its reports
	// did not count yet (zero with accounting off), this pick excluded.
	Pending Pending
	// Score is ScorePending(View.Report, Pending): lower is less loaded;
	// +Inf without ranks.
	Score float64
	// BestRank is the least loaded dp_rank, for routers that address a
	// rank themselves; -1 without ranks.
	BestRank int32
}

// PickResult is what Pick chose, and from which views.
type PickResult struct {
	// Picks are the chosen workers in the order drawn: the first is the
	// choice for this request, the others fallbacks (a retry, a hedge).
	// Fewer than asked when fewer qualify.
	Picks []Pick
	// Dispatch counts this request against Picks[0] until its Done, or
	// until a report of that worker counts it; nil with accounting off or
	// no pick. A router that sends the request elsewhere (a fallback)
	// calls Done and counts it there with Fleet.Dispatch.
	Dispatch *Dispatch
	// State is the state of every picked view: Fresh unless no worker is.
	State State
	// Degraded says no worker was Fresh, so the picks come from the best
	// state there was (Stale, then Unreachable, then Disconnected) and may
	// route on old or no load data.
	Degraded bool
	// Reason says why the result is degraded or empty.
	Reason string
}

type candidate struct {
	w       *Worker
	v       *View
	pending Pending
	score   float64
	best    int32
}

// Pick is PickFor a request of unknown size.
func (f *Fleet) Pick(n int) PickResult { return f.PickFor(Request{}, n) }

// PickFor chooses up to n distinct workers for req by the best of
// Options.Choices: for each pick, d workers are drawn at random from
// those not yet picked and the one with the lowest score wins (the first
// drawn on a tie; with d = 1 or d at least the candidates, every
// candidate is compared, from a random start). Only Fresh views qualify
// (judged now, on the fleet's clock), unless no worker is Fresh: then the
// best state present qualifies, and the result says Degraded.
//
// With accounting on (Options.Accounting), a worker's score is
// ScorePending of its report and what the router sent it that the
// worker's reports do not count yet (its Ledger, fed every report the
// Worker accepts), and the request is counted against Picks[0]
// (PickResult.Dispatch) until its Done or a report that counts it. So a
// burst of picks between two reports spreads over the workers instead of
// all landing on the one the last report showed least loaded.
func (f *Fleet) PickFor(req Request, n int) PickResult {
	ws := *f.workers.Load()
	if len(ws) == 0 || n <= 0 {
		return PickResult{State: Disconnected, Reason: "no workers to pick from"}
	}
	f.pickMu.Lock()
	defer f.pickMu.Unlock()
	now := f.deps.clock.Now()
	tier := Disconnected
	var pool []candidate
	for _, w := range ws {
		v := w.View()
		s := v.StateAt(now)
		if s < tier {
			continue
		}
		if s > tier {
			tier, pool = s, pool[:0]
		}
		c := candidate{w: w, v: v}
		if w.pending != nil {
			c.pending = w.pending.current()
		}
		c.score, c.best = ScorePending(v.Report, c.pending)
		pool = append(pool, c)
	}
	res := PickResult{State: tier}
	if tier != Fresh {
		res.Degraded = true
		res.Reason = fmt.Sprintf("no worker is fresh: picking among %d %s of %d", len(pool), tier, len(ws))
	}
	for len(res.Picks) < n && len(pool) > 0 {
		i := f.bestOf(pool)
		c := pool[i]
		res.Picks = append(res.Picks, Pick{Worker: c.w, View: c.v, Pending: c.pending, Score: c.score, BestRank: c.best})
		pool = slices.Delete(pool, i, i+1)
	}
	if len(res.Picks) > 0 {
		res.Dispatch = f.dispatch(res.Picks[0].Worker, now, req)
	}
	return res
}

// Dispatch counts a request the router sends to w without PickFor having
// chosen w for it (a fallback after Done on the first choice, a worker of
// its own choosing), as PickFor counts its first pick. nil with
// accounting off or when w is not in the fleet.
func (f *Fleet) Dispatch(w *Worker, req Request) *Dispatch {
	if w == nil || f.Worker(w.addr) != w { // addresses are unique in a fleet
		return nil
	}
	f.pickMu.Lock()
	defer f.pickMu.Unlock()
	return f.dispatch(w, f.deps.clock.Now(), req)
}

func (f *Fleet) dispatch(w *Worker, now time.Time, req Request) *Dispatch {
	if w.pending == nil {
		return nil
	}
	return w.pending.add(w, now, req)
}

// bestOf returns the index of the least loaded of Options.Choices
// candidates drawn at random; f.pickMu is held.
func (f *Fleet) bestOf(pool []candidate) int {
	n, d := len(pool), f.opts.Choices
	if n == 1 {
		return 0
	}
	if d == 1 || d >= n {
		// Every candidate, from a random start, so that ties do not
		// always go to the same worker.
		start := f.rnd.IntN(n)
		best := start
		for k := 1; k < n; k++ {
			if i := (start + k) % n; pool[i].score < pool[best].score {
				best = i
			}
		}
		return best
	}
	if d == 2 {
		i := f.rnd.IntN(n)
		j := f.rnd.IntN(n - 1)
		if j >= i {
			j++
		}
		if pool[j].score < pool[i].score {
			return j
		}
		return i
	}
	// d distinct draws: the first d steps of a Fisher–Yates shuffle.
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	best := -1
	for k := range d {
		r := k + f.rnd.IntN(n-k)
		idx[k], idx[r] = idx[r], idx[k]
		if best < 0 || pool[idx[k]].score < pool[best].score {
			best = idx[k]
		}
	}
	return best
}

// Score is the load score of a report alone: ScorePending with nothing
// pending.
func Score(r *pb.LoadReport) (score float64, best int32) { return ScorePending(r, Pending{}) }

// ScorePending is a worker's load score, in prompt tokens: what a new
// request would find ahead of it. Per rank, with the router's pending
// dispatches added as if the engine already held them, spread evenly over
// the N ranks as SGLang's data-parallel controller spreads requests:
//
//	rank = num_waiting_uncached_tokens + p.PromptTokens/N
//	     + RequestWeight × (num_running_reqs + num_waiting_reqs + p.Requests/N)
//
// The first term is the prefill queued ahead of a new request, which is
// what makes its time to first token: an engine prefills before it
// decodes, a queued prompt at a time, and a long prompt queued delays
// every request behind it by its whole prefill. The second counts the
// requests, a small term (RequestWeight tokens each): it orders workers
// whose queues are alike (none queued: the fewer requests, the shorter
// the decode steps a new request waits behind) and still counts a
// pending request of unknown size. Tokens are compared as they are, so
// scores compare workers of one kind (one model on one accelerator);
// across kinds, a token of prefill does not take the same time.
//
// The worker's score is the mean over its ranks (a request lands on an
// average rank, not the best one); best is the rank with the lowest
// score, for routers that pick the rank themselves. Lower is better. A
// report without ranks (nil, UNREACHABLE) scores +Inf with best -1.
func ScorePending(r *pb.LoadReport, p Pending) (score float64, best int32) {
	ranks := r.GetRanks()
	if len(ranks) == 0 {
		return math.Inf(1), -1
	}
	n := float64(len(ranks))
	added := (float64(max(0, p.PromptTokens)) + RequestWeight*float64(max(0, p.Requests))) / n
	lowest := math.Inf(1)
	for _, k := range ranks {
		s := RankScore(k) + added
		score += s
		if s < lowest {
			lowest, best = s, k.GetDpRank()
		}
	}
	return score / n, best
}

// RequestWeight is what one request weighs in a score, in prompt tokens
// (see ScorePending).
const RequestWeight = 1.0

// RankScore is one rank's term of Score: its waiting uncached tokens
// plus RequestWeight per running or waiting request.
func RankScore(k *pb.RankLoad) float64 {
	return float64(max(0, k.GetNumWaitingUncachedTokens())) +
		RequestWeight*float64(max(0, k.GetNumRunningReqs())+max(0, k.GetNumWaitingReqs()))
}

// notify signals a change to every subscriber.
func (f *Fleet) notify() { f.changes.publish(struct{}{}) }
