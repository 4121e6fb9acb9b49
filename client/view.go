package client

import (
	"fmt"
	"sync"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// State is how far a router may trust a worker's view, judged on receipt
// with the client's own clock (never the worker's, except for the
// snapshot-age bound).
type State int

// The states, worst first. Only Fresh is routed on when any worker is
// Fresh (see Fleet.Pick).
const (
	// Disconnected: no registered stream. The last report, if any, is kept
	// for display but says nothing about now.
	Disconnected State = iota
	// Unreachable: the worker says it cannot read its engine (its latest
	// report is UNREACHABLE).
	Unreachable
	// Stale: registered, but no report yet, none for more than
	// StaleAfterIntervals report intervals, the worker marked it STALE, or
	// its snapshot was older than MaxSnapshotAge when it arrived.
	Stale
	// Fresh: a HEALTHY report arrived within StaleAfterIntervals intervals
	// on a live stream.
	Fresh
)

// String names the state as the metrics label it.
func (s State) String() string {
	switch s {
	case Disconnected:
		return "disconnected"
	case Unreachable:
		return "unreachable"
	case Stale:
		return "stale"
	case Fresh:
		return "fresh"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// states lists every State, for one-hot metrics.
var states = [...]State{Disconnected, Unreachable, Stale, Fresh}

// View is a worker's latest state as this client sees it. A View is
// immutable once published: never modify it or its Report (proto.Clone
// the report to change it).
type View struct {
	// Addr is the worker's address as dialed.
	Addr string
	// State is the state when the view was published; StateAt accounts
	// for time passing since.
	State State
	// Reason says why the view is not Fresh ("" when it is).
	Reason string
	// Report is the latest accepted report; nil before the first. It
	// survives a reconnect to the same worker process and is replaced
	// when a new source_instance_id (a restarted worker) reports.
	Report *pb.LoadReport
	// ReceivedAt is when Report arrived, on the client's clock.
	ReceivedAt time.Time
	// StaleAt is when a Fresh view turns Stale unless a report arrives.
	StaleAt time.Time
	// PublishedAt is when this view was made.
	PublishedAt time.Time
	// Granted is the session the worker granted on the registered stream;
	// the zero Grant while Disconnected (no stream, so no grant).
	Granted Grant
}

// Grant is the configuration a worker holds for this client's session:
// what its registered acknowledgement granted, kept current by
// UpdateConfig and replaced by each new registration (a reconnect).
type Grant struct {
	// Interval is the report interval in force. The worker refuses an
	// interval outside its bounds rather than clamping it (and a refusal
	// stops the Worker), so an accepted one is granted as asked.
	Interval time.Duration
	// Lease is lease_ttl_ms of the acknowledgement: the asked lease
	// clamped into the worker's bounds (and by the client to 24h; the
	// lease asked when the worker grants 0 or less). After an UpdateConfig
	// that changes the lease it is the lease asked (see LeaseUnconfirmed).
	Lease time.Duration
	// RenewAfter is the keep-alive period: renew_after_ms of the
	// acknowledgement within [max(100ms, Lease/10), Lease/2]; after a lease
	// update, a third of the new lease when that is shorter, which is what
	// the keep-alives then follow.
	RenewAfter time.Duration
	// LeaseUnconfirmed says Lease comes from an update_config: the worker
	// acknowledges registrations only, so it may have clamped that lease.
	// The next registration confirms it.
	LeaseUnconfirmed bool
}

// StateAt is the view's state at now: a Fresh view whose StaleAt has
// passed is Stale, whether or not the Worker has noticed yet.
func (v *View) StateAt(now time.Time) State {
	if v == nil {
		return Disconnected
	}
	if v.State == Fresh && now.After(v.StaleAt) {
		return Stale
	}
	return v.State
}

// freshness are the rules judge applies.
type freshness struct {
	staleAfter     time.Duration // no report for longer: Stale
	maxSnapshotAge time.Duration // < 0: no bound
}

// judge decides the state of a view: connected says a stream is
// registered; r (may be nil) arrived at receivedAt; now is the present.
func judge(connected bool, r *pb.LoadReport, receivedAt, now time.Time, f freshness) (State, string) {
	switch {
	case !connected:
		return Disconnected, "no registered stream"
	case r == nil:
		return Stale, "no report yet"
	case r.GetStatus() == pb.ReportStatus_REPORT_STATUS_UNREACHABLE:
		return Unreachable, "worker reports UNREACHABLE: " + r.GetLastError()
	case r.GetStatus() == pb.ReportStatus_REPORT_STATUS_STALE:
		return Stale, "worker reports STALE: " + r.GetLastError()
	}
	if age := now.Sub(receivedAt); age > f.staleAfter {
		return Stale, fmt.Sprintf("no report for %v (more than %v)", age, f.staleAfter)
	}
	if f.maxSnapshotAge >= 0 {
		if age := snapshotAge(r, receivedAt); age > f.maxSnapshotAge {
			return Stale, fmt.Sprintf("snapshot was %v old on arrival (bound %v)", age, f.maxSnapshotAge)
		}
	}
	return Fresh, ""
}

// snapshotAge is how old the report's oldest stamped rank was at
// receivedAt; a rank without a stamp (a loadreporter worker stamps every
// one, docs/routers.md; other reporters may not) says nothing of its age and does
// not hide an older rank.
func snapshotAge(r *pb.LoadReport, receivedAt time.Time) time.Duration {
	var oldest int64
	for _, k := range r.GetRanks() {
		if t := k.GetSnapshotTimeUnixMs(); t > 0 && (oldest == 0 || t < oldest) {
			oldest = t
		}
	}
	if oldest == 0 {
		return 0
	}
	return receivedAt.Sub(time.UnixMilli(oldest))
}

// latest fans values out to capacity-1, latest-wins channels: a value not
// yet taken is replaced by the newer one, so a slow reader never holds up
// the publisher and always reads the newest. A Worker publishes its views
// through one; a Fleet publishes change signals (struct{}: a signal not
// yet taken stands for any number of changes).
type latest[T any] struct {
	mu     sync.Mutex
	chans  map[chan T]struct{}
	closed bool
}

// add registers a channel holding current's value, if it has one. current
// is read under the lock that publish holds, so no value published
// meanwhile is lost to the new subscriber.
func (s *latest[T]) add(current func() (T, bool)) (<-chan T, func()) {
	ch := make(chan T, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, ok := current(); ok {
		ch <- first
	}
	if s.closed {
		close(ch)
		return ch, func() {}
	}
	if s.chans == nil {
		s.chans = make(map[chan T]struct{})
	}
	s.chans[ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.chans[ch]; ok {
			delete(s.chans, ch)
			close(ch)
		}
	}
}

// publish replaces each channel's unread value with v; it never blocks.
func (s *latest[T]) publish(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.chans {
		select {
		case ch <- v:
			continue
		default:
		}
		select { // full: drop the unread value (readers only take)
		case <-ch:
		default:
		}
		ch <- v // room now: publishers hold mu, so none wrote meanwhile
	}
}

// close closes every channel; later subscriptions get a closed channel
// holding the current value.
func (s *latest[T]) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.chans {
		close(ch)
	}
	s.chans, s.closed = nil, true
}
