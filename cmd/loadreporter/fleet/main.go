package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/hostcheck"
	"github.com/loadreporter/loadreporter/web"
)

// Main is the fleet command's composition: the client fleet and the HTTP
// server in front of it. New, then Start (or Run), then Close.
type Main struct {
	cfg    Config
	fleet  *client.Fleet
	style  string // style.css's versioned URL
	script string // fleet.js's versioned URL
	srv    *http.Server
	ln     net.Listener
	served chan error
	log    *slog.Logger
	stream *fleetStream
	stalls *rpc.Stalls
	// shutDown ends every stream and bounds the writes still in progress
	// (serving.Port.Wrap).
	shutDown context.CancelFunc
	// stopWatch ends logWorkers; watched is closed once it returned.
	stopWatch func()
	watched   chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// New dials every target (returning at once: the views start
// Disconnected) and builds the server; it listens only on Start.
func New(c Config) (*Main, error) {
	f, err := client.NewFleet(c.ClientOptions())
	if err != nil {
		return nil, err
	}
	for _, t := range c.Targets {
		if err := f.Add(t); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	m := &Main{cfg: c, fleet: f, log: c.Logger}
	if m.style, err = web.AssetURL("style.css"); err == nil {
		m.script, err = web.AssetURL("fleet.js")
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if m.log == nil {
		m.log = c.Flags.New(os.Stderr)
	}
	// The port is bounded as serve's is, by the same code and flags: a
	// reader that stops reading is cut after --stalled-write-timeout, and
	// at shutdown after --final-write-timeout; HTTP/2 pings find dead
	// peers; bodies and headers come in time.
	m.stalls = rpc.NewStalls(c.StalledWriteTimeout, m.log)
	shuttingDown, shutDown := context.WithCancel(context.Background())
	m.shutDown = shutDown
	m.stream = &fleetStream{fleet: f, dashboard: c.dashboard, now: time.Now, stopping: shuttingDown.Done(),
		streams: newGate(c.MaxWatchSessions)}
	mux := http.NewServeMux()
	mux.Handle(m.stalls.Wrap(LoadsRoute, http.HandlerFunc(m.serveLoads)))
	mux.Handle(m.stalls.Wrap(PageRoute, http.HandlerFunc(m.servePage)))
	mux.Handle(m.stalls.Wrap(m.stream.handler()))
	mux.Handle("GET /static/", web.Static())
	// The fleet view has no token: only the names it was told about.
	h := hostcheck.Guard(c.Listen, strings.Split(c.AllowedHosts, ","), "add it with --allowed-host", mux)
	m.srv = c.Port.NewServer(c.Port.Wrap(h, shuttingDown, c.FinalWriteTimeout), m.log, false)
	return m, nil
}

// Fleet is the client fleet the view shows. A router that embeds the view
// picks through it (client.Fleet.PickFor), and the page shows what it
// sent each worker that the worker's report does not count yet.
func (m *Main) Fleet() *client.Fleet { return m.fleet }

// Start listens on Listen and serves in the background.
func (m *Main) Start() error {
	ln, err := net.Listen("tcp", m.cfg.Listen)
	if err != nil {
		return err
	}
	m.ln, m.served = ln, make(chan error, 1)
	go func() { m.served <- m.srv.Serve(ln) }()
	changed, cancel := m.fleet.Subscribe()
	m.stopWatch, m.watched = cancel, make(chan struct{})
	go func() {
		defer close(m.watched)
		m.logWorkers(changed)
	}()
	m.log.Info("fleet view serving", "listen", ln.Addr().String(), "workers", len(m.cfg.Targets))
	return nil
}

// logWorkers writes the workers' connects and losses through a workerLog
// until changed is closed, then what it still held back.
func (m *Main) logWorkers(changed <-chan struct{}) {
	l := newWorkerLog(m.log)
	window := time.NewTicker(workerLogWindow)
	defer window.Stop()
	for {
		select {
		case _, open := <-changed:
			if !open {
				l.endWindow(time.Now())
				return
			}
			l.observe(m.fleet.Views())
		case now := <-window.C:
			l.endWindow(now)
		}
	}
}

// Addr is the address the fleet view is served on, once started.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Run starts the server if needed, serves until ctx ends or the server
// fails, then closes everything.
func (m *Main) Run(ctx context.Context) error {
	if m.ln == nil {
		if err := m.Start(); err != nil {
			_ = m.fleet.Close()
			return err
		}
	}
	select {
	case <-ctx.Done():
	case err := <-m.served:
		m.served <- err // Close reports it
	}
	return m.Close()
}

// Close stops serving within --shutdown-grace and closes every worker's
// stream. Streams end at once; a write still in progress may wait
// --final-write-timeout for its reader, then the stream is cut. Cutting
// readers that stopped reading is what shutting down is for, not a
// failure: only the server failing, or a worker's stream failing to
// close, is an error. It is safe to call more than once.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	if m.ln == nil {
		return m.fleet.Close()
	}
	start := time.Now()
	open, writing := m.stream.streams.count(), m.stream.sending.Load()
	m.shutDown()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownGrace)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if err != nil {
		// A connection still busy when the grace ends (a stream's handler
		// that does not end) is closed under it.
		m.log.Warn("fleet view: connections still busy when the grace ended; closing them", "grace", m.cfg.ShutdownGrace)
		err = m.srv.Close()
	}
	err = errors.Join(err, ignoreClosed(<-m.served))
	m.stopWatch()
	<-m.watched
	err = errors.Join(err, m.fleet.Close())
	m.log.Info("fleet view stopped", "took", time.Since(start).Round(time.Millisecond), "streams_open", open,
		"streams_writing", writing, "streams_cut_for_not_reading", m.stalls.Ended())
	return err
}

// ignoreClosed is err unless it only says the server was closed.
func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// answer is the fleet's answer now.
func (m *Main) answer() Answer {
	return answerOf(time.Now(), m.fleet.Standings(), m.cfg.dashboard)
}

func (m *Main) serveLoads(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(m.answer())
}
