package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/hostcheck"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/web"
)

// Main is the fleet command's composition: the client fleet and the HTTP
// server in front of it. New, then Start (or Run), then Close.
type Main struct {
	cfg    Config
	fleet  *client.Fleet
	script string // fleet.js's versioned URL
	srv    *http.Server
	ln     net.Listener
	served chan error
	log    *slog.Logger
	// stopWatch ends logWorkers; watched is closed once it returned.
	stopWatch func()
	watched   chan struct{}
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
	script, err := web.AssetURL("fleet.js")
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	m := &Main{cfg: c, fleet: f, script: script, log: c.Logger}
	if m.log == nil {
		m.log = slog.Default()
	}
	// HTTP/1.1 for browsers, unencrypted HTTP/2 for gRPC clients of
	// WatchFleet.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	m.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Protocols: &protocols}
	stopping := make(chan struct{})
	var stopOnce sync.Once
	m.srv.RegisterOnShutdown(func() { stopOnce.Do(func() { close(stopping) }) })
	stream := &fleetStream{fleet: f, dashboard: c.dashboard, now: time.Now, stopping: stopping}
	mux := http.NewServeMux()
	mux.HandleFunc(LoadsRoute, m.serveLoads)
	mux.HandleFunc(PageRoute, m.servePage)
	mux.Handle(stream.handler())
	mux.Handle("GET /static/", web.Static())
	// The fleet view has no token: only the names it was told about.
	m.srv.Handler = hostcheck.Guard(c.Listen, strings.Split(c.AllowedHosts, ","), "add it with --allowed-host", mux)
	return m, nil
}

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

// logWorkers writes a line each time a worker gets a registered stream or
// loses it, with why: what an operator looks for when a row turns red.
// Fresh and stale, which turn with every report, are left to the page.
func (m *Main) logWorkers(changed <-chan struct{}) {
	connected := map[string]bool{}
	for range changed {
		for _, v := range m.fleet.Views() {
			up := v.State != client.Disconnected
			was, seen := connected[v.Addr]
			switch {
			case up == was && seen:
				continue
			case up:
				m.log.Info("fleet: worker connected", "worker", v.Addr)
			case seen:
				m.log.Warn("fleet: worker lost", "worker", v.Addr, "reason", v.Reason)
			}
			connected[v.Addr] = up
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

// Close stops serving (letting requests in flight finish, briefly) and
// closes every worker's stream. It is safe to call more than once.
func (m *Main) Close() error {
	var err error
	if m.ln != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = m.srv.Shutdown(ctx)
		if serr := <-m.served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		m.served <- http.ErrServerClosed
		m.stopWatch()
		<-m.watched
	}
	return errors.Join(err, m.fleet.Close())
}

// answer is the fleet's answer now.
func (m *Main) answer() Answer {
	return answerOf(time.Now(), m.fleet.Views(), m.cfg.dashboard)
}

func (m *Main) serveLoads(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(m.answer())
}
