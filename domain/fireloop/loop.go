package fireloop

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// DefaultPullBudget bounds one fire's pull, retry included.
const DefaultPullBudget = time.Second

// MinHistoryInterval is the shortest HistoryInterval but 0: each recorded
// report is a write, and audits count gaps against the interval, up to
// audit.MaxGapInterval.
const MinHistoryInterval = 10 * time.Millisecond

// Options configure a Loop. Source, Clock and Builder (with a positive
// StaleAfter) are required; New refuses what cannot work, naming the
// option (domain.InvalidOption).
type Options struct {
	Source   ports.SnapshotSource
	Clock    ports.Clock
	Builder  domain.ReportBuilder
	Limits   session.Limits
	Schedule session.Schedule
	// PhaseSlots spreads aligned sessions over this many phases of their
	// interval (session.Grid); 0 or 1 keeps one shared grid, and
	// session.AutoPhaseSlots (serve's default) opens phases as routers
	// come.
	PhaseSlots int
	// PullBudget bounds each fire's pull, retry included (default 1 s).
	PullBudget time.Duration
	// Expected is the rank set snapshots must carry; empty means learn it
	// from the first valid snapshot.
	Expected domain.RankSet
	// Observer, when set, is told about every fire and session change.
	Observer ports.FireObserver
	// History, when set with a positive HistoryInterval, records a report
	// every HistoryInterval — a session of its own, due whether or not a
	// router is connected — plus every report whose status differs from the
	// last one recorded, so outage boundaries are exact to the fire. Each
	// report is recorded once, however many sessions received it.
	History         ports.ReportSink
	HistoryInterval time.Duration
	// Between, when set with a positive BetweenEvery, sends the routers'
	// Monitor sessions a report between their deadlines each time its
	// numbers change between two pulls (a front passed a request on): the
	// last pull's snapshot with what changed since, at most once per
	// BetweenEvery, and once more at the end of a burst. It reads nothing
	// of the engine, moves no deadline and is not recorded in the history.
	Between      Recounter
	BetweenEvery time.Duration
	Logger       *slog.Logger
}

// Recounter is what Options.Between reads: the source's last snapshot as
// it stands now, and a signal each time that changes.
type Recounter interface {
	// Recount is the last pull's snapshot with what changed since; false
	// when there is none to send (the last pull failed).
	Recount() (domain.Snapshot, bool)
	// Changes is signalled when Recount would answer something new.
	Changes() <-chan struct{}
}

// Loop owns the session table and the fire loop.
type Loop struct {
	source   ports.SnapshotSource
	clock    ports.Clock
	builder  domain.ReportBuilder
	budget   time.Duration
	observer ports.FireObserver
	log      *slog.Logger

	wake        chan struct{} // poked when the table changed
	pulls       sync.WaitGroup
	pullRunning atomic.Bool // a pull's goroutine has not returned

	// stopping is cancelled by the first Shutdown.
	stopping context.Context
	stop     context.CancelFunc

	history         ports.ReportSink
	historyInterval time.Duration
	historySub      *Subscription // owned by the loop
	lastRecorded    *domain.Report

	// between: Options.Between, paced by window (BetweenEvery), which the
	// loop's goroutine alone touches.
	between          Recounter
	window           Window
	betweenDelivered atomic.Uint64
	// waitingFor is when the timer the loop waits on fires, as an offset
	// from epoch (whose monotonic reading a step of the wall clock does
	// not move), or noTimer while it runs or waits with none (Behind).
	epoch      time.Time
	waitingFor atomic.Int64

	mu         sync.Mutex
	table      *session.Table
	expected   domain.RankSet
	seq        uint64
	latest     *domain.Report
	closed     bool
	lastCounts []int // per session.Kinds(), as last told to the observer
}

// New validates o and returns a Loop; call Run to start its loop.
func New(o Options) (*Loop, error) {
	if o.Source == nil || o.Clock == nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "the fire loop needs a snapshot source and a clock")
	}
	if o.Limits == (session.Limits{}) {
		o.Limits = session.DefaultLimits()
	}
	if err := o.Limits.Validate(); err != nil {
		return nil, err
	}
	grid := session.Grid{Schedule: o.Schedule, PhaseSlots: o.PhaseSlots}
	if err := grid.Validate(); err != nil {
		return nil, err
	}
	if o.PullBudget == 0 {
		o.PullBudget = DefaultPullBudget
	}
	if o.PullBudget < 0 {
		return nil, domain.InvalidOption("pull-budget", "%s: must be > 0 (0: %s)", o.PullBudget, DefaultPullBudget)
	}
	if o.Builder.StaleAfter <= 0 {
		return nil, domain.InvalidOption("stale-after", "%s: must be > 0 (a report whose oldest rank is older is STALE; 0 would make every report STALE)", o.Builder.StaleAfter)
	}
	if err := o.Builder.Worker.Validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if iv := o.HistoryInterval; iv < 0 || iv > 0 && (iv < MinHistoryInterval || iv > audit.MaxGapInterval) {
		return nil, domain.InvalidOption("history-interval", "%s: want 0 (off), or from %s to %s", iv, MinHistoryInterval, audit.MaxGapInterval)
	}
	if o.History == nil {
		o.HistoryInterval = 0
	}
	if o.BetweenEvery < 0 || o.Between != nil && o.BetweenEvery > 0 && o.BetweenEvery < time.Millisecond {
		return nil, domain.InvalidOption("between-every", "%s: want 0 (off) or at least 1ms", o.BetweenEvery)
	}
	if o.BetweenEvery == 0 {
		o.Between = nil
	}
	stopping, stop := context.WithCancel(context.Background())
	epoch := o.Clock.Now()
	l := &Loop{
		stopping: stopping, stop: stop, epoch: epoch,
		source: o.Source, clock: o.Clock, builder: o.Builder, budget: o.PullBudget,
		observer: o.Observer, log: o.Logger,
		history: o.History, historyInterval: o.HistoryInterval,
		between: o.Between, window: Window{Every: o.BetweenEvery},
		wake:     make(chan struct{}, 1),
		table:    session.NewTable(o.Limits, grid, epoch),
		expected: o.Expected,
	}
	l.waitingFor.Store(noTimer)
	return l, nil
}

// noTimer is Loop.waitingFor while the loop waits on no timer.
const noTimer = math.MinInt64

// Limits returns the session limits in force.
func (l *Loop) Limits() session.Limits { return l.table.Limits() }

// Latest returns the most recent report, or nil before the first fire.
func (l *Loop) Latest() *domain.Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.latest
}

// SlotLoads returns how many recurring sessions each phase slot holds
// (one slot unless Options.PhaseSlots spread them; ten with automatic
// phases, the closed ones at 0).
func (l *Loop) SlotLoads() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.table.SlotLoads()
}

// Count returns the number of live sessions of kind k.
func (l *Loop) Count(k session.Kind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.table.Count(k)
}

// ExpectedRanks returns the rank set snapshots must match (empty: not
// learned yet).
func (l *Loop) ExpectedRanks() domain.RankSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expected
}

// SetExpectedRanks is an explicit topology update. It never causes a pull.
func (l *Loop) SetExpectedRanks(s domain.RankSet) {
	l.mu.Lock()
	l.expected = s
	l.mu.Unlock()
}

// Shutdown ends every session with SHUTTING_DOWN and refuses new ones. It is
// idempotent and safe to call from several goroutines; Run keeps going until
// its context ends.
func (l *Loop) Shutdown() {
	l.mu.Lock()
	l.closed = true
	l.table.RemoveAll(domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down"))
	l.mu.Unlock()
	l.stop()
	l.poke()
}

// ShuttingDown returns a context that ends when Shutdown is first called:
// what transports watch while a stream holds no session yet (a session
// learns of the shutdown from its own end). Its Done channel can be
// selected on, and context.AfterFunc waits on it without a goroutine.
func (l *Loop) ShuttingDown() context.Context { return l.stopping }

func (l *Loop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run is the fire loop. It returns when ctx ends, after shutting every
// session down and waiting (at most one pull budget) for an in-flight pull.
func (l *Loop) Run(ctx context.Context) error {
	defer l.waitPulls()
	defer l.Shutdown()
	if l.historyInterval > 0 {
		sub, err := l.Subscribe(session.Options{
			Kind: session.KindHistory, Name: "history",
			Config: session.Config{Interval: l.historyInterval}, NoLease: true,
		})
		if err != nil {
			return err
		}
		l.historySub = sub
	}
	var changes <-chan struct{}
	if l.between != nil {
		changes = l.between.Changes()
	}
	for {
		l.mu.Lock()
		now := l.clock.Now()
		sw := l.table.Sweep(now)
		counts := l.countsChanged()
		l.mu.Unlock()
		if counts != nil && l.observer != nil {
			l.observer.SessionsChanged(counts)
		}
		if sw.Due {
			if err := l.fire(ctx, sw.DueAt); err != nil {
				return nil
			}
			continue
		}
		due, held := l.window.Due()
		if held && !now.Before(due) {
			l.publishBetween(now)
			continue
		}
		wake, hasWake := sw.Wake, sw.HasWake
		if held && (!hasWake || due.Before(wake)) {
			wake, hasWake = due, true
		}
		var timerC <-chan time.Time
		var timer ports.Timer
		if hasWake {
			l.waitingFor.Store(int64(wake.Sub(l.epoch)))
			timer = l.clock.NewTimer(wake)
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			l.waitingFor.Store(noTimer)
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-l.wake:
		case <-timerC:
		case <-changes:
			if now := l.clock.Now(); l.window.Changed(now) {
				l.publishBetween(now)
			}
		}
		l.waitingFor.Store(noTimer)
		if timer != nil {
			timer.Stop()
		}
	}
}

// Behind reports whether, at now, the loop's timer is due and the loop
// has not taken it up yet: it waits for a processor. Whoever holds one
// through a long run of work yields it then, and only then.
func (l *Loop) Behind(now time.Time) bool {
	w := l.waitingFor.Load()
	return w != noTimer && int64(now.Sub(l.epoch)) >= w
}

// publishBetween delivers Options.Between's recount, built now, to the
// Monitor sessions between their deadlines. Only a HEALTHY report goes:
// when the latest pull's is not, or the recount is no longer (its stamps
// older than StaleAfter now), the routers wait for their deadline's pull.
// The report is not the latest a poller is served: pollers' freshness is
// the pulls'.
func (l *Loop) publishBetween(now time.Time) {
	l.window.Sent(now)
	l.mu.Lock()
	ready := !l.closed && l.latest != nil && l.latest.Status == domain.StatusHealthy && l.table.Count(session.KindMonitor) > 0
	l.mu.Unlock()
	if !ready {
		return
	}
	// Outside l.mu: a recount takes the front's lock and walks its
	// requests in flight.
	snap, ok := l.between.Recount()
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.builder.Verdict(snap, nil, l.expected, now) != nil {
		return
	}
	rep := l.builder.Report(l.seq+1, now, snap, nil)
	if rep.Status != domain.StatusHealthy {
		return
	}
	l.seq++
	delivered, _ := l.table.DeliverBetween(rep)
	l.betweenDelivered.Add(uint64(delivered[session.KindMonitor]))
}

// BetweenDelivered counts the reports delivered to routers between their
// deadlines (Options.Between).
func (l *Loop) BetweenDelivered() uint64 { return l.betweenDelivered.Load() }

// countsChanged returns the per-kind session counts when they changed since
// the last call. l.mu must be held.
func (l *Loop) countsChanged() map[string]int {
	kinds := session.Kinds()
	if l.lastCounts == nil {
		l.lastCounts = make([]int, len(kinds)) // all zero: nothing to tell yet
	}
	changed := false
	for i, k := range kinds {
		if n := l.table.Count(k); n != l.lastCounts[i] {
			l.lastCounts[i], changed = n, true
		}
	}
	if !changed {
		return nil
	}
	out := make(map[string]int, len(kinds))
	for i, k := range kinds {
		out[k.String()] = l.lastCounts[i]
	}
	return out
}

// publish numbers the fire's report and delivers it to every due
// session. The lock is released by defer: a panic here must crash the
// process, not leave it serving nothing with the lock held.
func (l *Loop) publish(completed time.Time, snap domain.Snapshot, verdict error) (rep *domain.Report, delivered, dropped session.PerKind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rep = l.builder.Report(l.seq, completed, snap, verdict)
	if rep.Status != domain.StatusUnreachable && l.expected.Empty() {
		l.expected = snap.RankSet()
	}
	l.latest = rep
	delivered, dropped = l.table.Deliver(rep, completed)
	return rep, delivered, dropped
}

// fire performs one pull, for sessions due since dueAt, and delivers its
// report. It returns ctx's error when the loop must stop.
func (l *Loop) fire(ctx context.Context, dueAt time.Time) error {
	l.mu.Lock()
	expected := l.expected
	l.mu.Unlock()

	start := l.clock.Now()
	res := l.pull(ctx, start, expected)
	if res.outcome == ports.PullCancelled {
		return ctx.Err()
	}
	completed := l.clock.Now()
	verdict := l.builder.Verdict(res.snap, res.err, expected, completed)
	if res.err == nil {
		switch domain.ErrorCode(verdict) {
		case domain.CodeRankSetChanged:
			res.outcome = ports.PullRankSet
		case "":
		default:
			res.outcome = ports.PullInvalid
		}
	}

	rep, delivered, dropped := l.publish(completed, res.snap, verdict)
	l.recordHistory(rep)

	if l.observer != nil {
		fr := ports.FireResult{
			Report: rep, Outcome: res.outcome, Attempts: res.attempts,
			Lateness:     max(0, start.Sub(dueAt)),
			PullDuration: completed.Sub(start),
			Delivered:    map[string]int{}, Dropped: map[string]int{},
		}
		for _, k := range session.Kinds() {
			fr.Delivered[k.String()] = delivered[k]
			fr.Dropped[k.String()] = dropped[k]
		}
		l.observer.Fired(fr)
	}
	return nil
}
