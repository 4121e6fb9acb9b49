package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/source/sim"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/logging"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/forwarded"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// NewLogger builds the process logger from the log flags.
func NewLogger(f logging.Flags) (*slog.Logger, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	return f.New(os.Stderr), nil
}

// Engine is the configured snapshot source, plus the simulator's controls
// when the source is the simulator.
type Engine struct {
	Source ports.SnapshotSource
	Sim    *sim.Source // nil unless --source sim
	// Expected is the rank set snapshots must carry (empty: learn it).
	Expected domain.RankSet
	// name is the source's row name, for logs and messages.
	name string
	// getLoadShape is the source's engine's shape of GET /get_load
	// (empty: sglang's).
	getLoadShape string
	// close releases the source once; nil when the caller owns the source.
	close func() error
	// start runs what the source does in the background (the ZMQ
	// subscribers); nil for sources that only work when pulled.
	start func(ctx context.Context) error
}

// givenEngine is the Engine InitializeMainWithEngine is given, or none.
type givenEngine struct{ Engine }

// NewEngine builds the snapshot source of --source from its row, unless
// given holds one already (InitializeMainWithEngine; the caller keeps
// owning it); its cleanup releases the source's connections. Nothing runs
// until Start.
func NewEngine(c SourceConfig, given givenEngine, clk ports.Clock, m *metrics.Metrics) (Engine, func(), error) {
	if e := given.Engine; e.Source != nil {
		if e.name == "" {
			e.name = c.Name
		}
		return e, func() {}, nil
	}
	row, ok := sourceRowNamed(c.Name)
	if !ok {
		return Engine{}, nil, fmt.Errorf("--source %q: want %s", c.Name, sourceNames())
	}
	c.MaxDPSize = cmp.Or(c.MaxDPSize, rpc.DefaultMaxDPSize) // as AdminService takes it
	if c.DPSize < 0 || c.DPSize > c.MaxDPSize {
		return Engine{}, nil, fmt.Errorf("--dp-size %d: want 0 (learn) to %d (--max-dp-size)", c.DPSize, c.MaxDPSize)
	}
	src, closer, err := row.open(c, sourceDeps{clock: clk, metrics: m})
	if err != nil {
		return Engine{}, nil, err
	}
	e := Engine{Source: src, name: row.name, getLoadShape: row.getLoadShape, Expected: domain.RankRange(c.DPSize)}
	if s, ok := src.(*sim.Source); ok {
		e.Sim = s
		if c.DPSize == 0 { // the simulator knows its own ranks
			_, n := s.Mode()
			e.Expected = domain.RankRange(n)
		}
	}
	if s, ok := src.(interface{ Start(context.Context) error }); ok {
		e.start = s.Start
	}
	if closer != nil {
		e.close = sync.OnceValue(closer.Close)
	}
	return e, func() { _ = e.Close() }, nil
}

// Start runs the source's background work, if it has any, until ctx ends.
func (e Engine) Start(ctx context.Context) error {
	if e.start == nil {
		return nil
	}
	return e.start(ctx)
}

// Close releases the source's connections; later calls return the first
// call's result.
func (e Engine) Close() error {
	if e.close == nil {
		return nil
	}
	return e.close()
}

// NewSimControl is the admin service's handle on the simulator: nil (not
// a nil *sim.Source) when the source is another engine.
func NewSimControl(e Engine) rpc.SimControl {
	if e.Sim == nil {
		return nil
	}
	return e.Sim
}

// NewMetrics returns the Prometheus metrics of the fire loop.
func NewMetrics(clk ports.Clock) *metrics.Metrics {
	m := metrics.New(clk.Now)
	b := buildinfo.Read()
	m.SetBuildInfo(b.Version, b.Revision, b.GoVersion)
	return m
}

// NewFireObserver tells the metrics and the status log about every fire.
func NewFireObserver(m *metrics.Metrics, log *slog.Logger) ports.FireObserver {
	return observers{m, newStatusLog(log)}
}

// NewWorker is what every report says about the worker: --worker-type
// read, --worker-addr defaulting to the listen address (fireloop.New
// checks the text).
func NewWorker(c WorkerConfig, s ServerConfig) (domain.Worker, error) {
	wt, err := domain.ParseWorkerType(c.Type)
	if err != nil {
		return domain.Worker{}, err
	}
	return domain.Worker{Addr: workerAddr(c.Addr, s.Listen), Type: wt, Model: c.Model, Zone: c.Zone}, nil
}

// workerAddr is --worker-addr, defaulting to the listen address; a
// wildcard host (":8080", "0.0.0.0:8080") says nothing to a fleet-wide
// history, so the machine's host name stands in for it.
func workerAddr(addr, listen string) string {
	if addr != "" {
		return addr
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if name, err := os.Hostname(); err == nil && name != "" {
			return net.JoinHostPort(name, port)
		}
	}
	return listen
}

// NewFireLoop builds the fire loop; rec is nil when history is off. Its
// clock is the precise one: its timer is when every router's report is
// due.
func NewFireLoop(c FireConfig, limits session.Limits, h HistoryConfig, front FrontConfig, w domain.Worker, e Engine, fwd *forwarded.Ledger, clk clock.Precise,
	obs ports.FireObserver, rec *recorder.Recorder, log *slog.Logger) (*fireloop.Loop, error) {
	schedule, err := session.ParseSchedule(c.Schedule)
	if err != nil {
		return nil, err
	}
	var sink ports.ReportSink
	if rec != nil {
		sink = rec
	}
	if front.PushOnForward < 0 {
		return nil, fmt.Errorf("--front-push-on-forward %s: must not be negative (0: off)", front.PushOnForward)
	}
	src := e.Source
	var between fireloop.Recounter
	if fwd != nil {
		counted := &forwarded.Source{Inner: src, Ledger: fwd}
		src = counted
		if front.PushOnForward > 0 {
			between = counted
		}
	}
	if front.PushOnForward != 0 && between == nil {
		return nil, fmt.Errorf("--front-push-on-forward %s needs --front-listen and --front-count-forwarded (what it pushes is the front's count)", front.PushOnForward)
	}
	return fireloop.New(fireloop.Options{
		Source:          src,
		Clock:           clk,
		Builder:         domain.ReportBuilder{SourceInstanceID: newInstanceID(), Worker: w, StaleAfter: c.StaleAfter},
		Limits:          limits,
		Schedule:        schedule,
		PhaseSlots:      c.PhaseSlots,
		PullBudget:      c.PullBudget,
		Expected:        e.Expected,
		Observer:        obs,
		History:         sink,
		HistoryInterval: h.Interval,
		Between:         between,
		BetweenEvery:    front.PushOnForward,
		Logger:          log,
	})
}

// NewForwarded is the front's count of the requests it passed to the
// engine that the engine's snapshots do not show yet; nil without a
// front or with --front-count-forwarded=false.
func NewForwarded(c FrontConfig) *forwarded.Ledger {
	if c.Listen == "" || !c.CountForwarded {
		return nil
	}
	return &forwarded.Ledger{}
}

// NewPoll returns the /v1/loads, /get_load and GetLoads handler for
// polling routers; --get-load-shape defaults to the source's engine's.
func NewPoll(c PollConfig, e Engine, p pollapi.Poller) (*pollapi.Handler, error) {
	shape := c.GetLoadShape
	if shape == "" {
		shape = e.getLoadShape
	}
	return pollapi.New(p, pollapi.Options{MaxAge: c.MaxAge, ServeStale: c.ServeStale, GetLoadShape: shape})
}

// newInstanceID is a random id made once per process (source_instance_id).
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// observers fans one fire out to several observers.
type observers []ports.FireObserver

func (o observers) Fired(f ports.FireResult) {
	for _, x := range o {
		x.Fired(f)
	}
}

func (o observers) SessionsChanged(c map[string]int) {
	for _, x := range o {
		x.SessionsChanged(c)
	}
}

// NewMonitor returns the Monitor service with the router-stream limits;
// stalls ends a stream whose reports stay blocked.
func NewMonitor(c StreamsConfig, loop *fireloop.Loop, clk ports.Clock, log *slog.Logger, m *metrics.Metrics, stalls *rpc.Stalls) (*rpc.Monitor, error) {
	o := c.Monitor
	o.Clock, o.Logger, o.Stalls = clk, log, stalls
	mon, err := rpc.NewMonitorWithOptions(loop, o)
	if err != nil {
		return nil, err
	}
	m.WatchMonitor(mon.PendingStreams, mon.FirstFrameTimeouts, mon.OverBudget, mon.StreamErrors)
	m.WatchPhaseSlots(loop.SlotLoads)
	m.WatchBetween(loop.BetweenDelivered)
	return mon, nil
}

// NewStalls returns what ends lease-less streams (Watch, ORCA) whose
// client stopped reading, counted in the metrics.
func NewStalls(c StreamsConfig, log *slog.Logger, m *metrics.Metrics) *rpc.Stalls {
	s := rpc.NewStalls(c.Port.StalledWriteTimeout, log)
	m.WatchStalls(s.Ended)
	return s
}

// NewAdmin returns the admin service, guarded by --admin-token when set.
func NewAdmin(src SourceConfig, sec SecurityConfig, sim rpc.SimControl, topology rpc.Topology, log *slog.Logger) (*rpc.Admin, error) {
	return rpc.NewAdminWithOptions(sim, topology, rpc.AdminOptions{Token: sec.AdminToken, MaxDPSize: src.MaxDPSize, Logger: log})
}
