package fireloop

import (
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
)

// Subscription is one session's handle for its transport.
type Subscription struct {
	l *Loop
	s *session.Session
}

// Register validates a router's registration (docs/routers.md) and starts a
// Monitor session that is due at once. A live session with the same
// router_id is replaced (it ends with REPLACED).
func (l *Loop) Register(routerID string, intervalMs, leaseMs int64) (*Subscription, session.Config, error) {
	cfg, err := l.table.Limits().Register(routerID, intervalMs, leaseMs)
	if err != nil {
		return nil, session.Config{}, err
	}
	sub, err := l.Subscribe(session.Options{Kind: session.KindMonitor, Name: routerID, Config: cfg})
	return sub, cfg, err
}

// Subscribe starts a session of any kind with an already validated config.
func (l *Loop) Subscribe(o session.Options) (*Subscription, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down")
	}
	s, _, err := l.table.Add(o, l.clock.Now())
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	l.poke()
	return &Subscription{l: l, s: s}, nil
}

// Reports yields the session's latest undelivered report.
func (sub *Subscription) Reports() <-chan *domain.Report { return sub.s.Outbox().Reports() }

// Take returns the session's latest undelivered report and empties its
// outbox, or nil when none waits.
func (sub *Subscription) Take() *domain.Report { return sub.s.Outbox().Take() }

// Ended says whether the session ended.
func (sub *Subscription) Ended() bool { return sub.s.Outbox().Ended() }

// Notify makes the session call f whenever a report is waiting to be taken
// or the session ended. f runs on the fire loop's goroutine with its lock
// held, so it must not block.
func (sub *Subscription) Notify(f func()) { sub.s.Outbox().Notify(f) }

// Done is closed when the session ended; Err says why.
func (sub *Subscription) Done() <-chan struct{} { return sub.s.Outbox().Done() }

// Err is the *domain.Error that ended the session, or nil.
func (sub *Subscription) Err() error { return sub.s.Outbox().Err() }

// Dropped counts reports this session missed because it read too slowly.
func (sub *Subscription) Dropped() uint64 { return sub.s.Outbox().Dropped() }

// RouterID is the session's router_id.
func (sub *Subscription) RouterID() string { return sub.s.RouterID() }

// KeepAlive renews the lease. It never moves a report deadline.
//
// It takes no lock: a renewal is one compare-and-swap on the session's
// lease (session.Session.Renew), which the loop reads when it sweeps, so
// however many keep-alives arrive, none waits for a fire's pass over the
// table and none delays one.
func (sub *Subscription) KeepAlive() error {
	if !sub.s.Renew(sub.l.clock.Now()) {
		return sub.ended()
	}
	// No poke: a renewed lease only moves the next wake later, and a loop
	// that wakes early just finds nothing expired. Thousands of routers
	// renewing every few seconds must not each cost a pass over the table.
	return nil
}

// Update applies an update_config as a whole: either every present field
// applies or none does (docs/routers.md).
func (sub *Subscription) Update(intervalMs, leaseMs *int64) (session.Config, error) {
	l := sub.l
	l.mu.Lock()
	defer l.poke()
	defer l.mu.Unlock()
	if !l.table.Live(sub.s) {
		return session.Config{}, sub.ended()
	}
	cfg, err := l.table.Limits().Update(sub.s.Config(), intervalMs, leaseMs)
	if err != nil {
		return sub.s.Config(), err
	}
	l.table.Update(sub.s, cfg, l.clock.Now(), intervalMs != nil)
	return cfg, nil
}

// Reregister handles a second register on a live stream: a full config
// update, validated by Update. The router_id may not change.
func (sub *Subscription) Reregister(routerID string, intervalMs, leaseMs int64) (session.Config, error) {
	if routerID != sub.s.RouterID() {
		return session.Config{}, domain.Errorf(domain.CodeInvalidArgument,
			"router_id %q differs from %q registered on this stream; open a new stream to register another router",
			routerID, sub.s.RouterID())
	}
	return sub.Update(&intervalMs, &leaseMs)
}

// Close ends the session cleanly if it is still live. Closing a replaced
// session never touches its replacement.
func (sub *Subscription) Close() {
	l := sub.l
	l.mu.Lock()
	removed := l.table.Remove(sub.s, nil)
	l.mu.Unlock()
	if removed {
		l.poke()
	}
}

func (sub *Subscription) ended() error {
	if err := sub.Err(); err != nil {
		return err
	}
	return domain.Errorf(domain.CodeNotFound, "the session has ended")
}
