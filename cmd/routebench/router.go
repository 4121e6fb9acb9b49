package main

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// kind is where a way of choosing a worker reads its load from.
type kind int

const (
	// kindOracle reads every engine's true state at the instant of
	// dispatch (model.Engine.Live). With the best of two it is the
	// reference of every ratio: the push rows' rule with nothing stale.
	kindOracle kind = iota
	// kindPush routes on the reports a loadreporter pushes every
	// Interval (client.Fleet in the end-to-end mode).
	kindPush
	// kindPoll routes on the reporter's GET /v1/loads, polled every
	// Interval, as SMG and the SGLang gateway do.
	kindPoll
	// kindLocal routes on the router's own count of requests in flight
	// to each worker, with no reporter.
	kindLocal
	// kindRoundRobin sends to each worker in turn.
	kindRoundRobin
	// kindRandom sends to a worker drawn uniformly.
	kindRandom
)

// policy is one way of choosing a worker: one row of the table.
type policy struct {
	// Key names the row in --e2e-rows.
	Key  string
	Name string
	Kind kind
	// Interval is the report interval (push) or the poll interval (poll).
	// A push Interval of 0 reads the engines' published snapshots at
	// every pick, as if a report came with every request.
	Interval time.Duration
	// Choices is the d of the best of d: 2 is the best of two, 0 compares
	// every worker (least loaded).
	Choices int
	// Accounting adds what the router sent since a report's snapshot to
	// the worker's score (client.Options.Accounting).
	Accounting bool
	// Beside runs each loadreporter beside its engine, the routers sending
	// to the engine itself; otherwise the reporter is the engine's front
	// (serve --front-listen), which every request passes through and
	// which counts what it passed on that the engine has not published
	// yet into its reports (domain/forwarded).
	Beside bool
	// PushOnForward makes each front also push its report between the
	// deadlines when it passes a request on, at most once per
	// PushOnForward (serve --front-push-on-forward); 0: one report a
	// deadline.
	PushOnForward time.Duration
}

// reporter says the row runs a loadreporter in front of or beside each
// engine.
func (p policy) reporter() bool { return p.Kind == kindPush || p.Kind == kindPoll }

// front says the row's reporters are the engines' fronts.
func (p policy) front() bool { return p.reporter() && !p.Beside }

// policies are the rows, in the order printed.
var policies = []policy{
	{Key: "oracle", Name: "oracle, best of 2", Kind: kindOracle, Choices: 2},
	{Key: "oracle-least", Name: "oracle, least loaded", Kind: kindOracle},
	{Key: "push100-acct", Name: "push 100ms, best of 2, accounting", Kind: kindPush, Interval: 100 * time.Millisecond, Choices: 2, Accounting: true},
	{Key: "push100", Name: "push 100ms, best of 2", Kind: kindPush, Interval: 100 * time.Millisecond, Choices: 2},
	{Key: "push100-acct-fwd", Name: "push 100ms, best of 2, accounting, on forward", Kind: kindPush, Interval: 100 * time.Millisecond, Choices: 2, Accounting: true, PushOnForward: 10 * time.Millisecond},
	{Key: "push100-acct-beside", Name: "push 100ms, best of 2, accounting, beside", Kind: kindPush, Interval: 100 * time.Millisecond, Choices: 2, Accounting: true, Beside: true},
	{Key: "push1s-acct", Name: "push 1s, best of 2, accounting", Kind: kindPush, Interval: time.Second, Choices: 2, Accounting: true},
	{Key: "push1s", Name: "push 1s, best of 2", Kind: kindPush, Interval: time.Second, Choices: 2},
	{Key: "poll1s-least", Name: "poll 1s, least loaded", Kind: kindPoll, Interval: time.Second},
	{Key: "poll1s-b2", Name: "poll 1s, best of 2", Kind: kindPoll, Interval: time.Second, Choices: 2},
	{Key: "poll10s-least", Name: "poll 10s, least loaded", Kind: kindPoll, Interval: 10 * time.Second},
	{Key: "poll10s-b2", Name: "poll 10s, best of 2", Kind: kindPoll, Interval: 10 * time.Second, Choices: 2},
	{Key: "local", Name: "router-local in-flight, least", Kind: kindLocal},
	{Key: "rr", Name: "round robin", Kind: kindRoundRobin},
	{Key: "random", Name: "random", Kind: kindRandom},
}

// Indexes into policies that the goal and the checks name.
const (
	rowOracle      = 0
	rowOracleLeast = 1
	rowPush100Acct = 2
	rowPush100     = 3
	rowPush100Fwd  = 4
	rowPush100Side = 5
	rowPush1sAcct  = 6
	rowPush1s      = 7
	rowPoll1sLeast = 8
	rowPoll1sB2    = 9
	rowPoll10Least = 10
	rowPoll10B2    = 11
	rowLocal       = 12
	rowRandom      = 14
)

// choose returns the index of the least score among d of n workers drawn
// at random, exactly as client.Fleet's best of d draws: for d = 2 two
// distinct workers, the second winning only when strictly lower; for
// 3 ≤ d < n the first d steps of a Fisher–Yates shuffle, the first drawn
// winning ties; for d = 0 or d ≥ n every worker, from a random start. d =
// 1 is one worker drawn at random (the supermarket model's random choice;
// client.Options.Choices 1 means every worker instead). score is called
// only for the workers drawn.
func choose(rng *rand.Rand, n, d int, score func(int) float64) int {
	switch {
	case n == 1:
		return 0
	case d == 1:
		return rng.IntN(n)
	case d <= 0 || d >= n:
		start := rng.IntN(n)
		best, bestScore := start, score(start)
		for k := 1; k < n; k++ {
			i := (start + k) % n
			if s := score(i); s < bestScore {
				best, bestScore = i, s
			}
		}
		return best
	case d == 2:
		i := rng.IntN(n)
		j := rng.IntN(n - 1)
		if j >= i {
			j++
		}
		if score(j) < score(i) {
			return j
		}
		return i
	}
	// d distinct draws, each uniform among the workers not yet drawn, the
	// first drawn winning ties: the distribution of client.Fleet's partial
	// Fisher–Yates shuffle, without its O(n) table.
	drawn := make([]int, 0, d)
	best, bestScore := -1, 0.0
	for len(drawn) < d {
		i := rng.IntN(n)
		if slices.Contains(drawn, i) {
			continue
		}
		drawn = append(drawn, i)
		if s := score(i); best < 0 || s < bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// sources is what a router reads when it picks.
type sources interface {
	// live is worker k's true load at the instant of the pick.
	live(k int) *pb.LoadReport
	// report is the latest report router r holds of worker k; nil: none.
	report(r, k int) *pb.LoadReport
}

// router is one router's choosing, shared by both modes (the end-to-end
// push rows excepted: there client.Fleet chooses).
type router struct {
	id       int
	pol      policy
	rng      *rand.Rand
	n        int
	rr       int
	inflight []int
	// pend is the router's accounting per worker: client's own rules
	// (client.Ledger), which client.Fleet runs on the machine's clock.
	pend []client.Ledger
}

func newRouter(id int, pol policy, workers int, seed uint64) *router {
	return &router{
		id: id, pol: pol, n: workers, rr: id % workers,
		rng:      rand.New(rand.NewPCG(seed, uint64(id)+1)),
		inflight: make([]int, workers), pend: make([]client.Ledger, workers),
	}
}

// pick chooses the worker for a request at now.
func (r *router) pick(now time.Time, src sources) int {
	switch r.pol.Kind {
	case kindOracle:
		return choose(r.rng, r.n, r.pol.Choices, func(k int) float64 { s, _ := client.Score(src.live(k)); return s })
	case kindPush, kindPoll:
		return choose(r.rng, r.n, r.pol.Choices, func(k int) float64 {
			rep := src.report(r.id, k)
			var p client.Pending
			if r.pol.Accounting {
				r.observe(k, rep, now)
				p = r.pend[k].Pending()
			}
			s, _ := client.ScorePending(rep, p)
			return s
		})
	case kindLocal:
		return choose(r.rng, r.n, 0, func(k int) float64 { return float64(r.inflight[k]) })
	case kindRoundRobin:
		k := r.rr
		r.rr = (r.rr + 1) % r.n
		return k
	}
	return r.rng.IntN(r.n)
}

// observe hands worker k's report, received at now, to the router's
// accounting, as client.Fleet's workers hand it every report they
// accept (one already observed changes nothing).
func (r *router) observe(k int, rep *pb.LoadReport, now time.Time) {
	if r.pol.Accounting {
		r.pend[k].Observe(rep, now)
	}
}

// sent records a request sent to worker k at now; the returned record is
// what finished takes.
func (r *router) sent(k int, now time.Time, req request) *client.Sent {
	r.inflight[k]++
	if !r.pol.Accounting {
		return nil
	}
	return r.pend[k].Add(now, req.clientRequest())
}

// finished records the end of a request sent to worker k.
func (r *router) finished(k int, d *client.Sent) {
	r.inflight[k]--
	r.pend[k].Done(d)
}

// reportOf is the report a loadreporter builds from an engine's loads
// pulled at pulled: the report's time is the pull's; with engineStamps
// each rank carries the engine's own time of its numbers
// (model.Load.Timestamp, which SGLang's /v1/loads and the simulated engine
// send), and without, the pull's, as the reporter stamps a rank that
// carries no timestamp of its own.
func reportOf(loads []model.Load, pulled time.Time, engineStamps bool) *pb.LoadReport {
	ranks := make([]*pb.RankLoad, len(loads))
	for i, l := range loads {
		stamp := pulled
		if engineStamps {
			stamp = l.Timestamp
		}
		ranks[i] = &pb.RankLoad{
			DpRank: int32(l.DPRank), SnapshotTimeUnixMs: stamp.UnixMilli(),
			NumRunningReqs: int64(l.NumRunningReqs), NumWaitingReqs: int64(l.NumWaitingReqs),
			NumWaitingUncachedTokens: l.NumWaitingUncachedTokens, NumUsedTokens: l.NumUsedTokens,
			NumTotalTokens: l.NumTotalTokens, MaxTotalNumTokens: l.MaxTotalNumTokens,
			MaxRunningRequests: int64(l.MaxRunningRequests), TokenUsage: l.TokenUsage,
			GenThroughput: l.GenThroughput, CacheHitRate: l.CacheHitRate, Utilization: l.Utilization,
		}
	}
	return &pb.LoadReport{ReportTimeUnixMs: pulled.UnixMilli(), Status: pb.ReportStatus_REPORT_STATUS_HEALTHY, Ranks: ranks}
}
