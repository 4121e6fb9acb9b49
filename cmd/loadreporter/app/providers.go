package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanggrpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanghttp"
	"github.com/loadreporter/loadreporter/adapters/source/sglangzmq"
	"github.com/loadreporter/loadreporter/adapters/source/sim"
	"github.com/loadreporter/loadreporter/adapters/source/vllm"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// NewLogger builds the process logger from the config.
func NewLogger(c Config) *slog.Logger { return c.Flags.New(os.Stderr) }

// Engine is the configured snapshot source, plus the simulator's controls
// when the source is the simulator.
type Engine struct {
	Source ports.SnapshotSource
	Sim    *sim.Source // nil unless --source sim
	// close releases the source once; nil when the caller owns the source.
	close func() error
	// start runs what the source does in the background (the ZMQ
	// subscribers); nil for sources that only work when pulled.
	start func(ctx context.Context) error
}

// NewEngine builds the snapshot source named by --source; its cleanup
// releases the source's connections. Nothing runs until Start.
func NewEngine(c Config, clk ports.Clock, m *metrics.Metrics) (Engine, func(), error) {
	src, closer, err := openSource(c, clk, m)
	if err != nil {
		return Engine{}, nil, err
	}
	e := Engine{Source: src}
	if s, ok := src.(*sim.Source); ok {
		e.Sim = s
	}
	if s, ok := src.(interface{ Start(context.Context) error }); ok {
		e.start = s.Start
	}
	if closer != nil {
		e.close = sync.OnceValue(closer.Close)
	}
	return e, func() { _ = e.Close() }, nil
}

func openSource(c Config, clk ports.Clock, m *metrics.Metrics) (ports.SnapshotSource, io.Closer, error) {
	switch c.Source {
	case "sim":
		s, err := sim.New(sim.Options{Ranks: c.DPSize, Clock: clk, Seed: c.SimSeed})
		if err != nil {
			return nil, nil, err
		}
		if err := s.SetMode(c.SimMode); err != nil {
			return nil, nil, fmt.Errorf("--sim-mode: %s", domain.ErrorMessage(err))
		}
		return s, nil, nil
	case "sglang-http":
		s, err := sglanghttp.New(sglanghttp.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey})
		return s, s, err
	case "sglang-grpc":
		s, err := sglanggrpc.New(sglanggrpc.Options{Target: c.EngineURL, APIKey: c.EngineAPIKey})
		return s, s, err
	case "sglang-zmq":
		return openZMQ(c, clk, m)
	case "vllm-metrics":
		s, err := vllm.New(vllm.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey,
			MaxRunningRequests: c.VLLMMaxRunningRequests, MaxTotalNumTokens: c.VLLMMaxTotalNumTokens, Clock: clk})
		return s, s, err
	}
	return nil, nil, fmt.Errorf("--source %s is not available in this build", c.Source)
}

// openZMQ builds the sglang-zmq source, with the sglang-http source on the
// same engine as its detail pull when --engine-url is known, and its
// socket events counted in the metrics.
func openZMQ(c Config, clk ports.Clock, m *metrics.Metrics) (ports.SnapshotSource, io.Closer, error) {
	o := sglangzmq.Options{
		Endpoint: c.ZMQEndpoint, EngineURL: c.EngineURL, APIKey: c.EngineAPIKey, DPSize: c.DPSize, MaxDPSize: c.MaxDPSize,
		Clock: clk, DetailInterval: c.DetailInterval, Observer: zmqObserver(m),
		MaxRunningRequests: c.ZMQMaxRunningRequests,
	}
	var detail *sglanghttp.Source
	if c.EngineURL != "" && c.DetailInterval > 0 {
		d, err := sglanghttp.New(sglanghttp.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey})
		if err != nil {
			return nil, nil, err
		}
		detail, o.Detail = d, d
	} else {
		o.DetailInterval = 0
	}
	s, err := sglangzmq.New(o)
	if err != nil {
		if detail != nil {
			_ = detail.Close()
		}
		return nil, nil, err
	}
	if detail == nil {
		return s, s, nil
	}
	return s, closers{s, detail}, nil
}

// zmqObserver counts what the ZMQ sockets see besides load.
func zmqObserver(m *metrics.Metrics) sglangzmq.Observer {
	return sglangzmq.Observer{
		SequenceReset: func(rank int) { m.SourceEvent("sequence_reset", rank) },
		SequenceGap:   func(rank int, _ uint64) { m.SourceEvent("sequence_gap", rank) },
		BadMessage:    func(rank int, _ error) { m.SourceEvent("bad_message", rank) },
		Resubscribed:  func(rank int) { m.SourceEvent("resubscribed", rank) },
		DetailPull: func(err error) {
			if err != nil {
				m.SourceEvent("detail_pull_failed", -1)
			}
		},
	}
}

// closers closes each in order and joins their errors.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
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
func NewSimControl(s *sim.Source) rpc.SimControl {
	if s == nil {
		return nil
	}
	return s
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

// NewFireLoop builds the fire loop from the config; rec is nil when
// history is off. Its clock is the precise one: its timer is when every
// router's report is due.
func NewFireLoop(c Config, src ports.SnapshotSource, simSrc *sim.Source, clk clock.Precise, obs ports.FireObserver,
	rec *recorder.Recorder, log *slog.Logger) (*fireloop.Loop, error) {
	schedule, err := session.ParseSchedule(c.Schedule)
	if err != nil {
		return nil, err
	}
	wt, err := domain.ParseWorkerType(c.WorkerType)
	if err != nil {
		return nil, err
	}
	// --dp-size wins; the simulator knows its own ranks; others are learned.
	expected := domain.RankRange(c.DPSize)
	if simSrc != nil && c.DPSize == 0 {
		_, n := simSrc.Mode()
		expected = domain.RankRange(n)
	}
	var sink ports.ReportSink
	if rec != nil {
		sink = rec
	}
	return fireloop.New(fireloop.Options{
		Source: src,
		Clock:  clk,
		Builder: domain.ReportBuilder{
			SourceInstanceID: newInstanceID(),
			Worker:           domain.Worker{Addr: workerAddr(c), Type: wt, Model: c.Model, Zone: c.Zone},
			StaleAfter:       c.StaleAfter,
		},
		Limits:          c.Limits,
		Schedule:        schedule,
		PhaseSlots:      c.PhaseSlots,
		PullBudget:      c.PullBudget,
		Expected:        expected,
		Observer:        obs,
		History:         sink,
		HistoryInterval: c.HistoryInterval,
		Logger:          log,
	})
}

// NewPoll returns the /v1/loads handler for polling routers.
func NewPoll(c Config, p pollapi.Poller) *pollapi.Handler {
	return pollapi.New(p, pollapi.Options{MaxAge: c.PollMaxAge, ServeStale: c.PollServeStale, GetLoadShape: getLoadShape(c)})
}

// getLoadShape is --get-load-shape, else the shape of the source's engine.
func getLoadShape(c Config) string {
	switch {
	case c.GetLoadShape != "":
		return c.GetLoadShape
	case c.Source == "vllm-metrics":
		return pollapi.GetLoadVLLM
	}
	return pollapi.GetLoadSGLang
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

// NewMonitor returns the Monitor service with the router-stream limits of
// the config; stalls ends a stream whose reports stay blocked.
func NewMonitor(c Config, loop *fireloop.Loop, clk ports.Clock, log *slog.Logger, m *metrics.Metrics, stalls *rpc.Stalls) (*rpc.Monitor, error) {
	o := c.Monitor
	o.Clock, o.Logger, o.Stalls = clk, log, stalls
	mon, err := rpc.NewMonitorWithOptions(loop, o)
	if err != nil {
		return nil, err
	}
	m.WatchMonitor(mon.PendingStreams, mon.FirstFrameTimeouts, mon.OverBudget, mon.StreamErrors)
	m.WatchPhaseSlots(loop.SlotLoads)
	return mon, nil
}

// NewStalls returns what ends lease-less streams (Watch, ORCA) whose
// client stopped reading, counted in the metrics.
func NewStalls(c Config, log *slog.Logger, m *metrics.Metrics) *rpc.Stalls {
	s := rpc.NewStalls(c.StalledWriteTimeout, log)
	m.WatchStalls(s.Ended)
	return s
}

// NewAdmin returns the admin service, guarded by --admin-token when set.
func NewAdmin(c Config, sim rpc.SimControl, topology rpc.Topology, log *slog.Logger) (*rpc.Admin, error) {
	return rpc.NewAdminWithOptions(sim, topology, rpc.AdminOptions{Token: c.AdminToken, MaxDPSize: c.MaxDPSize, Logger: log})
}
