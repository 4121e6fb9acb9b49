package client

import (
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// Ledger is one router's count of what it sent one worker that the
// worker's reports do not show yet: the pure rules behind a Fleet's
// accounting (Options.Accounting), with time passed in and no goroutine
// or lock of its own, so that a simulation in virtual time runs the very
// rules a Fleet runs. The zero Ledger is empty and ready. It is not safe
// for concurrent use (a Fleet holds one per worker under a mutex).
//
// A request is counted from Add until Done, or until the worker's
// reports count it: a request sent at t is in an engine's numbers once
// the engine took them after t. When that was, a report says only
// roughly. The engine publishes its load after a prefill step, when it
// goes idle and every --load-snapshot-publish-interval decode steps (15
// by default, SGLang's), and a rank's snapshot_time_unix_ms is the
// engine's own time of its numbers only where the engine stamps them;
// otherwise (SGLang's /v1/loads stamps no rank) the reporter stamps the
// rank with its pull's completion, which is also report_time_unix_ms. So,
// per rank (see Observe):
//
//   - stamped by the engine (a stamp before report_time_unix_ms): the
//     numbers count what was sent before their stamp;
//   - stamped by the pull: numbers that equal the rank's previous ones
//     are the engine's old snapshot pulled again and count nothing new,
//     however late the pull; numbers that changed were taken after the
//     last pull that showed the old ones, and count what was sent before
//     that pull. A request that reaches an engine with a free slot makes
//     it prefill and so publish within a step: numbers that stand still
//     mean what was sent since is still queued, or that nothing was.
//
// Numbers that stand still for more than MaxSnapshotHold are taken as an
// idle engine's and their stamp trusted again, so that a router that
// never calls Done does not count for ever. A request sent is never in
// the reports sooner than the rules say, and may be counted twice (by the
// reports and by the ledger) for up to a report interval after the
// engine took it in: a request counted twice moves the next pick away
// from a worker for a moment, one missed sends it a crowd.
type Ledger struct {
	q    []*Sent // oldest first
	head int
	live int // counted records in q[head:]
	sum  Pending

	// last is the latest report observed; ranks what it showed, per
	// dp_rank.
	last  *pb.LoadReport
	ranks map[int32]rankSeen
	// until: every request sent before it is in the reports' numbers.
	until time.Time
}

// Sent is one request a Ledger counts. Its zero value, and nil, count
// nothing.
type Sent struct {
	at      time.Time
	req     Request // normalized: no negative size
	counted bool
}

// rankSeen is what the reports showed of one rank.
type rankSeen struct {
	load rankNumbers
	// since: the numbers count every request sent before it.
	since time.Time
	stamp time.Time // the latest report's stamp for the rank
}

// rankNumbers are a rank's load numbers, without its stamp: equal numbers
// in two reports are one engine snapshot pulled twice.
type rankNumbers struct {
	running, waiting, waitingTokens, used, total, maxTotal, maxRunning int64
	usage, throughput, hitRate, utilization                            float64
}

func numbersOf(k *pb.RankLoad) rankNumbers {
	return rankNumbers{
		running: k.GetNumRunningReqs(), waiting: k.GetNumWaitingReqs(), waitingTokens: k.GetNumWaitingUncachedTokens(),
		used: k.GetNumUsedTokens(), total: k.GetNumTotalTokens(), maxTotal: k.GetMaxTotalNumTokens(),
		maxRunning: k.GetMaxRunningRequests(), usage: k.GetTokenUsage(), throughput: k.GetGenThroughput(),
		hitRate: k.GetCacheHitRate(), utilization: k.GetUtilization(),
	}
}

// MaxSnapshotHold bounds how long a Ledger takes a rank's unchanged
// numbers for one old snapshot (see Ledger): past it, the rank is taken
// as idle and its stamp is trusted. An SGLang engine with a full batch
// publishes every 15 decode steps, under a second; 2s leaves room.
const MaxSnapshotHold = 2 * time.Second

// maxPendingDispatches bounds the requests a Ledger remembers: a router
// that never calls Done, towards a worker that sends no report, would
// otherwise grow the list for ever. Past it the oldest is forgotten.
const maxPendingDispatches = 1 << 16

// Add counts req, sent at at (on the router's clock), and returns its
// record for Done. Requests are added in time order; one added out of
// order ages out no sooner than the one before it.
func (l *Ledger) Add(at time.Time, req Request) *Sent {
	s := &Sent{at: at, req: req.normalized(), counted: true}
	l.q = append(l.q, s)
	l.live++
	l.sum = l.sum.plus(s.req, 1)
	for l.live > maxPendingDispatches {
		l.uncount(l.q[l.head])
		l.q[l.head] = nil
		l.head++
	}
	l.ageOut()
	return s
}

// Done stops counting s (the request finished, failed or was abandoned);
// again, or after s aged out, it does nothing.
func (l *Ledger) Done(s *Sent) {
	if s == nil {
		return
	}
	l.uncount(s)
	l.ageOut()
}

// Observe takes the worker's next report, received at receivedAt on the
// router's clock, and ages out what its numbers count (see Ledger): the
// requests sent before the time every one of its ranks counts from. A
// rank without a stamp counts as stamped by the pull at receivedAt. A
// report without ranks (UNREACHABLE) ages nothing out; the report
// observed last (the same pointer) changes nothing, nor does a rank whose
// stamp goes back in time (an older report seen late). Reports are
// observed in the order they arrive, every one: a ledger that misses some
// only counts longer.
func (l *Ledger) Observe(r *pb.LoadReport, receivedAt time.Time) {
	ranks := r.GetRanks()
	if len(ranks) == 0 || r == l.last {
		return
	}
	l.last = r
	if l.ranks == nil {
		l.ranks = map[int32]rankSeen{}
	}
	var until time.Time
	for i, k := range ranks {
		t := l.seen(k, r.GetReportTimeUnixMs(), receivedAt)
		if i == 0 || t.Before(until) {
			until = t
		}
	}
	if len(l.ranks) > len(ranks) {
		// The rank set changed: forget the ranks that left, so that a
		// worker renumbering its ranks cannot grow the map for ever.
		present := make(map[int32]struct{}, len(ranks))
		for _, k := range ranks {
			present[k.GetDpRank()] = struct{}{}
		}
		for dp := range l.ranks {
			if _, ok := present[dp]; !ok {
				delete(l.ranks, dp)
			}
		}
	}
	if until.After(l.until) {
		l.until = until
	}
	l.ageOut()
}

// seen records rank k of a report pulled at reportMs (received at
// receivedAt) and returns the time before which its numbers count every
// request sent.
func (l *Ledger) seen(k *pb.RankLoad, reportMs int64, receivedAt time.Time) time.Time {
	stamp := receivedAt
	ms := k.GetSnapshotTimeUnixMs()
	if ms > 0 {
		stamp = time.UnixMilli(ms)
	}
	if ms > 0 && ms < reportMs {
		// Stamped before the pull completed: the engine's own time of
		// its numbers, which count what came before it.
		l.ranks[k.GetDpRank()] = rankSeen{load: numbersOf(k), since: stamp, stamp: stamp}
		return stamp
	}
	nums := numbersOf(k)
	seen, ok := l.ranks[k.GetDpRank()]
	switch {
	case !ok:
		seen = rankSeen{load: nums, since: stamp, stamp: stamp}
	case stamp.Before(seen.stamp):
		// An older report, seen late: what it shows is not news.
	case nums != seen.load:
		// New numbers, taken since the last pull that showed the old
		// ones: they count what was sent before that pull.
		seen = rankSeen{load: nums, since: seen.stamp, stamp: stamp}
	default:
		seen.stamp = stamp
	}
	l.ranks[k.GetDpRank()] = seen
	if held := seen.stamp.Add(-MaxSnapshotHold); held.After(seen.since) {
		return held
	}
	return seen.since
}

// Pending is what the ledger counts now.
func (l *Ledger) Pending() Pending { return l.sum }

// Reset forgets every request and report: the worker left, or its
// records can no longer be trusted. A Done that comes later does
// nothing.
func (l *Ledger) Reset() {
	for _, s := range l.q[l.head:] {
		if s != nil {
			s.counted = false
		}
	}
	*l = Ledger{}
}

// ageOut drops, from the oldest, what the reports count.
func (l *Ledger) ageOut() {
	for l.head < len(l.q) && (!l.q[l.head].counted || l.q[l.head].at.Before(l.until)) {
		l.uncount(l.q[l.head])
		l.q[l.head] = nil
		l.head++
	}
	l.tidy()
}

// uncount takes s out of the totals once.
func (l *Ledger) uncount(s *Sent) {
	if !s.counted {
		return
	}
	s.counted = false
	l.live--
	l.sum = l.sum.plus(s.req, -1)
}

// tidy keeps q proportional to what it counts: it drops what lies before
// head once that is half of q, and the records no longer counted behind
// the head once they outnumber the counted ones.
func (l *Ledger) tidy() {
	n := len(l.q) - l.head
	if n == 0 {
		l.q, l.head = l.q[:0], 0
		return
	}
	if n <= 2*l.live+64 && l.head <= len(l.q)/2 {
		return
	}
	kept := make([]*Sent, 0, 2*l.live+1)
	for _, s := range l.q[l.head:] {
		if s.counted {
			kept = append(kept, s)
		}
	}
	l.q, l.head = kept, 0
}
