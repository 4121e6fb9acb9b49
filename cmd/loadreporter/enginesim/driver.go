package enginesim

import (
	"context"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// driver runs the model on a clock: one goroutine sleeps until the
// model's next step ends (or a request comes or goes), advances the model
// to the clock's time and hands each request's new tokens to the handler
// waiting for them. Handlers and the loop share the model under mu.
type driver struct {
	clock ports.Clock
	hooks hooks

	mu       sync.Mutex
	eng      *model.Engine
	flights  map[uint64]*flight
	closed   bool // no more requests: shutting down
	events   []model.Event
	advances uint64        // Advance calls so far
	advanced chan struct{} // closed and replaced after each Advance
	tokens   uint64        // tokens produced so far, every request
	produced chan struct{} // closed and replaced when tokens grows

	wake chan struct{} // capacity 1: something changed the model's next event
}

// hooks are told, under the driver's lock, what the model did. Each must
// return quickly and never call back into the driver.
type hooks struct {
	// published: rank refreshed its published load snapshot.
	published func(rank int, l model.Load)
	// metrics: rank refreshed its metrics snapshot.
	metrics func(rank int, l model.Load)
	// token: a request produced its k-th token (1-based) at; gap is the
	// time since its previous token (0 for the first).
	token func(f *flight, k int, at time.Time, gap time.Duration)
	// finished: a request got its last token or was cancelled.
	finished func(f *flight, st model.RequestStats)
	// submitted: a request was admitted to the engine's queues.
	submitted func(f *flight)
}

// flight is one request in the engine, as its handler sees it. Fields
// below notify are guarded by the driver's mu.
type flight struct {
	id uint64
	// quiet requests (health checks) are not counted in metrics, as
	// SGLang's log_metrics=False.
	quiet bool
	// notify has capacity 1: the handler is told that something changed.
	notify chan struct{}

	tokens    int
	done      bool
	aborted   bool // ended by shutdown, not by the engine
	stats     model.RequestStats
	lastToken time.Time
}

func newDriver(eng *model.Engine, clock ports.Clock, h hooks) *driver {
	return &driver{
		clock: clock, hooks: h, eng: eng,
		flights:  map[uint64]*flight{},
		advanced: make(chan struct{}), produced: make(chan struct{}),
		wake: make(chan struct{}, 1),
	}
}

func (d *driver) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// submit puts r into the engine now. A request the engine refuses is
// CodeInvalidArgument; one after shutdown began is CodeShuttingDown.
func (d *driver) submit(r model.Request, quiet bool) (*flight, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, domain.Errorf(domain.CodeShuttingDown, "the engine is shutting down")
	}
	id, err := d.eng.Submit(d.clock.Now(), r)
	if err != nil {
		return nil, err
	}
	st, _ := d.eng.Request(id)
	f := &flight{id: id, quiet: quiet, notify: make(chan struct{}, 1), stats: st}
	d.flights[id] = f
	if d.hooks.submitted != nil {
		d.hooks.submitted(f)
	}
	d.poke()
	return f, nil
}

// cancel takes f out of the engine, freeing its slot and KV tokens; it
// does nothing for a request that is done.
func (d *driver) cancel(f *flight) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.done {
		return
	}
	st, ok := d.eng.Cancel(d.clock.Now(), f.id)
	delete(d.flights, f.id)
	f.done = true
	signal(f.notify) // for a handler other than the canceller
	if ok {
		f.stats = st
		if d.hooks.finished != nil {
			d.hooks.finished(f, st)
		}
	}
	d.poke()
}

// state is what f has so far.
func (d *driver) state(f *flight) (tokens int, done, aborted bool, st model.RequestStats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return f.tokens, f.done, f.aborted, f.stats
}

// run drives the engine until ctx ends.
func (d *driver) run(ctx context.Context) {
	for {
		d.mu.Lock()
		next, ok := d.eng.NextEvent()
		d.mu.Unlock()
		var timer ports.Timer
		var fire <-chan time.Time
		if ok {
			timer = d.clock.NewTimer(next)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-d.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		d.advance()
	}
}

// advance moves the engine to the clock's time and delivers what
// happened.
func (d *driver) advance() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = d.eng.Advance(d.clock.Now(), d.events[:0])
	grew := false
	for _, ev := range d.events {
		switch ev.Kind {
		case model.EventTokens:
			f := d.flights[ev.Request]
			if f == nil {
				continue
			}
			gap := time.Duration(0)
			if !f.lastToken.IsZero() {
				gap = ev.At.Sub(f.lastToken)
			}
			f.tokens, f.lastToken = ev.Tokens, ev.At
			d.tokens++
			grew = true
			if d.hooks.token != nil {
				d.hooks.token(f, ev.Tokens, ev.At, gap)
			}
			signal(f.notify)
		case model.EventFinished:
			f := d.flights[ev.Request]
			if f == nil {
				continue
			}
			delete(d.flights, ev.Request)
			f.tokens, f.done, f.stats = ev.Tokens, true, ev.Stats
			if d.hooks.finished != nil {
				d.hooks.finished(f, ev.Stats)
			}
			signal(f.notify)
		case model.EventLoadPublished:
			if d.hooks.published != nil {
				d.hooks.published(ev.Rank, d.eng.Published(ev.Rank))
			}
		case model.EventMetricsPublished:
			if d.hooks.metrics != nil {
				d.hooks.metrics(ev.Rank, d.eng.Metrics(ev.Rank))
			}
		}
	}
	if grew {
		close(d.produced)
		d.produced = make(chan struct{})
	}
	d.advances++
	close(d.advanced)
	d.advanced = make(chan struct{})
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// shutdown refuses new requests and ends every request in flight as
// aborted, so that no handler waits for an engine that stopped.
func (d *driver) shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	now := d.clock.Now()
	for id, f := range d.flights {
		if st, ok := d.eng.Cancel(now, id); ok {
			f.stats = st
		}
		f.done, f.aborted = true, true
		signal(f.notify)
	}
	clear(d.flights)
}

// loads returns every rank's published load snapshot.
func (d *driver) loads() []model.Load {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]model.Load, d.eng.Params().DPSize)
	now := d.clock.Now()
	for r := range out {
		out[r] = d.eng.PublishedAt(r, now)
	}
	return out
}

// live returns every rank's load as it stands now.
func (d *driver) live() []model.Load {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	out := make([]model.Load, d.eng.Params().DPSize)
	for r := range out {
		out[r] = d.eng.Live(r, now)
	}
	return out
}

// progress returns how many tokens were produced so far and a channel
// closed when that number grows.
func (d *driver) progress() (uint64, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tokens, d.produced
}

// inFlight is how many requests are in the engine.
func (d *driver) inFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.flights)
}

// isClosed says shutdown began.
func (d *driver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}
