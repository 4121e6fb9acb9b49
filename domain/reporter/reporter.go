package reporter

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// DefaultPullBudget bounds one fire's pull, retry included.
const DefaultPullBudget = time.Second

// Options configure a Reporter. Source, Clock and Builder are required.
type Options struct {
	Source   ports.SnapshotSource
	Clock    ports.Clock
	Builder  domain.ReportBuilder
	Limits   session.Limits
	Schedule session.Schedule
	// PullBudget bounds each fire's pull, retry included (default 1 s).
	PullBudget time.Duration
	// Expected is the rank set snapshots must carry; empty means learn it
	// from the first valid snapshot.
	Expected domain.RankSet
	// Observer, when set, is told about every fire and session change.
	Observer ports.ReporterObserver
	// History, when set with a positive HistoryInterval, records a report
	// every HistoryInterval — a session of its own, due whether or not a
	// router is connected — plus every report whose status differs from the
	// last one recorded, so outage boundaries are exact to the fire. Each
	// report is recorded once, however many sessions received it.
	History         ports.ReportSink
	HistoryInterval time.Duration
	Logger          *slog.Logger
}

// Reporter owns the session table and the fire loop.
type Reporter struct {
	source   ports.SnapshotSource
	clock    ports.Clock
	builder  domain.ReportBuilder
	budget   time.Duration
	observer ports.ReporterObserver
	log      *slog.Logger

	wake  chan struct{} // poked when the table changed
	pulls sync.WaitGroup

	history         ports.ReportSink
	historyInterval time.Duration
	historySub      *Subscription // owned by the loop
	lastRecorded    *domain.Report

	mu         sync.Mutex
	table      *session.Table
	expected   domain.RankSet
	seq        uint64
	latest     *domain.Report
	closed     bool
	lastCounts [4]int
}

// New validates o and returns a Reporter; call Run to start its loop.
func New(o Options) (*Reporter, error) {
	if o.Source == nil || o.Clock == nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "reporter needs a snapshot source and a clock")
	}
	if o.Limits == (session.Limits{}) {
		o.Limits = session.DefaultLimits()
	}
	if err := o.Limits.Validate(); err != nil {
		return nil, err
	}
	if o.PullBudget == 0 {
		o.PullBudget = DefaultPullBudget
	}
	if o.PullBudget < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "pull-budget must be > 0, got %s", o.PullBudget)
	}
	if o.Builder.StaleAfter < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "stale-after must be ≥ 0, got %s", o.Builder.StaleAfter)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HistoryInterval < 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "history-interval must be ≥ 0 (0 turns history off), got %s", o.HistoryInterval)
	}
	if o.History == nil {
		o.HistoryInterval = 0
	}
	return &Reporter{
		source: o.Source, clock: o.Clock, builder: o.Builder, budget: o.PullBudget,
		observer: o.Observer, log: o.Logger,
		history: o.History, historyInterval: o.HistoryInterval,
		wake:     make(chan struct{}, 1),
		table:    session.NewTable(o.Limits, o.Schedule, o.Clock.Now()),
		expected: o.Expected,
	}, nil
}

// Limits returns the session limits in force.
func (r *Reporter) Limits() session.Limits { return r.table.Limits() }

// Latest returns the most recent report, or nil before the first fire.
func (r *Reporter) Latest() *domain.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

// Count returns the number of live sessions of kind k.
func (r *Reporter) Count(k session.Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Count(k)
}

// ExpectedRanks returns the rank set snapshots must match (empty: not
// learned yet).
func (r *Reporter) ExpectedRanks() domain.RankSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expected
}

// SetExpectedRanks is an explicit topology update. It never causes a pull.
func (r *Reporter) SetExpectedRanks(s domain.RankSet) {
	r.mu.Lock()
	r.expected = s
	r.mu.Unlock()
}

// Shutdown ends every session with SHUTTING_DOWN and refuses new ones. It is
// idempotent and safe to call from several goroutines; Run keeps going until
// its context ends.
func (r *Reporter) Shutdown() {
	r.mu.Lock()
	r.closed = true
	r.table.RemoveAll(domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down"))
	r.mu.Unlock()
	r.poke()
}

func (r *Reporter) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run is the fire loop. It returns when ctx ends, after shutting every
// session down and waiting (at most one pull budget) for an in-flight pull.
func (r *Reporter) Run(ctx context.Context) error {
	defer r.waitPulls()
	defer r.Shutdown()
	if r.historyInterval > 0 {
		sub, err := r.Subscribe(session.Options{
			Kind: session.KindHistory, Name: "history",
			Config: session.Config{Interval: r.historyInterval}, NoLease: true,
		})
		if err != nil {
			return err
		}
		r.historySub = sub
	}
	for {
		r.mu.Lock()
		now := r.clock.Now()
		r.table.ExpireLeases(now)
		due := r.table.AnyDue(now)
		wake, hasWake := r.table.NextWake()
		counts := r.countsChanged()
		r.mu.Unlock()
		if counts != nil && r.observer != nil {
			r.observer.SessionsChanged(counts)
		}
		if due {
			if err := r.fire(ctx); err != nil {
				return nil
			}
			continue
		}
		var timerC <-chan time.Time
		var timer ports.Timer
		if hasWake {
			timer = r.clock.NewTimer(wake)
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-r.wake:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// countsChanged returns the per-kind session counts when they changed since
// the last call. r.mu must be held.
func (r *Reporter) countsChanged() map[string]int {
	var now [4]int
	for i, k := range session.Kinds() {
		now[i] = r.table.Count(k)
	}
	if now == r.lastCounts {
		return nil
	}
	r.lastCounts = now
	out := make(map[string]int, len(now))
	for i, k := range session.Kinds() {
		out[k.String()] = now[i]
	}
	return out
}

func (r *Reporter) waitPulls() {
	done := make(chan struct{})
	go func() { r.pulls.Wait(); close(done) }()
	t := r.clock.NewTimer(r.clock.Now().Add(r.budget))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		r.log.Warn("snapshot source ignored cancellation; leaving its pull behind")
	}
}

// fire performs one pull and delivers its report. It returns ctx's error
// when the loop must stop.
func (r *Reporter) fire(ctx context.Context) error {
	r.mu.Lock()
	expected := r.expected
	r.mu.Unlock()

	start := r.clock.Now()
	res := r.pull(ctx, start, expected)
	if res.outcome == ports.PullCancelled {
		return ctx.Err()
	}
	completed := r.clock.Now()
	verdict := res.err
	if verdict == nil {
		verdict = domain.ValidateSnapshot(res.snap, expected)
		switch domain.ErrorCode(verdict) {
		case domain.CodeRankSetChanged:
			res.outcome = ports.PullRankSet
		case "":
		default:
			res.outcome = ports.PullInvalid
		}
	}

	r.mu.Lock()
	r.seq++
	rep := r.builder.Build(r.seq, completed, res.snap, verdict, expected)
	if rep.Status != domain.StatusUnreachable && r.expected.Empty() {
		r.expected = res.snap.RankSet()
	}
	r.latest = rep
	delivered, dropped := r.table.Deliver(rep, completed)
	r.mu.Unlock()
	r.recordHistory(rep)

	if r.observer != nil {
		fr := ports.FireResult{
			Report: rep, Outcome: res.outcome, Attempts: res.attempts,
			PullDuration: completed.Sub(start),
			Delivered:    map[string]int{}, Dropped: map[string]int{},
		}
		for _, k := range session.Kinds() {
			fr.Delivered[k.String()] = delivered[k]
			fr.Dropped[k.String()] = dropped[k]
		}
		r.observer.Fired(fr)
	}
	return nil
}

// recordHistory hands rep to the history sink when the history session was
// due at this fire, or when its status differs from the last recorded one.
func (r *Reporter) recordHistory(rep *domain.Report) {
	if r.historySub == nil {
		return
	}
	due := false
	select {
	case <-r.historySub.Reports():
		due = true
	default:
	}
	if due || r.lastRecorded == nil || r.lastRecorded.Status != rep.Status {
		r.history.Record(rep)
		r.lastRecorded = rep
	}
}

type pullResult struct {
	snap     domain.Snapshot
	err      error
	outcome  ports.PullOutcome
	attempts int
}

// pull runs the source in its own goroutine so that a source that hangs
// cannot hold the loop past the budget.
func (r *Reporter) pull(ctx context.Context, start time.Time, expected domain.RankSet) pullResult {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan pullResult, 1)
	r.pulls.Add(1)
	go func() {
		defer r.pulls.Done()
		results <- r.attempt(pctx, expected)
	}()
	timer := r.clock.NewTimer(start.Add(r.budget))
	defer timer.Stop()
	select {
	case res := <-results:
		return res
	case <-timer.C():
		return pullResult{
			err:     domain.Errorf(domain.CodePullTimeout, "load snapshot pull timed out after %s", r.budget),
			outcome: ports.PullTimeout, attempts: 1,
		}
	case <-ctx.Done():
		return pullResult{err: ctx.Err(), outcome: ports.PullCancelled}
	}
}

// attempt pulls once, and once more when the rank set differs from the
// expected one (the engine may be mid-reconfiguration).
func (r *Reporter) attempt(ctx context.Context, expected domain.RankSet) pullResult {
	snap, err := r.source.Pull(ctx)
	if err != nil || expected.Empty() || domain.CheckRankSet(expected, snap.RankSet()) == nil || ctx.Err() != nil {
		return classify(snap, err, 1)
	}
	snap, err = r.source.Pull(ctx)
	return classify(snap, err, 2)
}

func classify(snap domain.Snapshot, err error, attempts int) pullResult {
	switch {
	case err == nil:
		return pullResult{snap: snap, outcome: ports.PullOK, attempts: attempts}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return pullResult{err: err, outcome: ports.PullTimeout, attempts: attempts}
	default:
		return pullResult{err: err, outcome: ports.PullError, attempts: attempts}
	}
}
