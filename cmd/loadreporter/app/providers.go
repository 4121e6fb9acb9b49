package app

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanggrpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanghttp"
	"github.com/loadreporter/loadreporter/adapters/source/sim"
	"github.com/loadreporter/loadreporter/adapters/source/vllm"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// NewLogger builds the process logger from the config.
func NewLogger(c Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// NewClock returns the system clock.
func NewClock() ports.Clock { return clock.System{} }

// Engine is the configured snapshot source, plus the simulator's controls
// when the source is the simulator.
type Engine struct {
	Source ports.SnapshotSource
	Sim    *sim.Source // nil unless --source sim
	closer io.Closer
}

// NewEngine builds the snapshot source named by --source.
func NewEngine(c Config, clk ports.Clock) (Engine, error) {
	switch c.Source {
	case "sim":
		s, err := sim.New(sim.Options{Ranks: c.DPSize, Clock: clk, Seed: c.SimSeed})
		if err != nil {
			return Engine{}, err
		}
		if err := s.SetMode(c.SimMode); err != nil {
			return Engine{}, fmt.Errorf("--sim-mode: %s", domain.ErrorMessage(err))
		}
		return Engine{Source: s, Sim: s}, nil
	case "sglang-http":
		s, err := sglanghttp.New(sglanghttp.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey})
		if err != nil {
			return Engine{}, err
		}
		return Engine{Source: s, closer: s}, nil
	case "sglang-grpc":
		s, err := sglanggrpc.New(sglanggrpc.Options{Target: c.EngineURL, APIKey: c.EngineAPIKey})
		if err != nil {
			return Engine{}, err
		}
		return Engine{Source: s, closer: s}, nil
	case "vllm-metrics":
		s, err := vllm.New(vllm.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey,
			MaxRunningRequests: c.VLLMMaxRunningRequests, Clock: clk})
		if err != nil {
			return Engine{}, err
		}
		return Engine{Source: s, closer: s}, nil
	}
	return Engine{}, fmt.Errorf("--source %s is not available in this build", c.Source)
}

// Close releases the source's connections.
func (e Engine) Close() error {
	if e.closer == nil {
		return nil
	}
	return e.closer.Close()
}

// NewMetrics returns the Prometheus metrics of the fire loop.
func NewMetrics(clk ports.Clock) *metrics.Metrics { return metrics.New(clk.Now) }

// NewFireLoop builds the fire loop from the config.
func NewFireLoop(c Config, e Engine, clk ports.Clock, m *metrics.Metrics, h *History, log *slog.Logger) (*fireloop.Loop, error) {
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
	if e.Sim != nil && c.DPSize == 0 {
		_, n := e.Sim.Mode()
		expected = domain.RankRange(n)
	}
	return fireloop.New(fireloop.Options{
		Source: e.Source,
		Clock:  clk,
		Builder: domain.ReportBuilder{
			SourceInstanceID: newInstanceID(),
			Worker:           domain.Worker{Addr: workerAddr(c), Type: wt, Model: c.Model, Zone: c.Zone},
			StaleAfter:       c.StaleAfter,
		},
		Limits:          c.Limits,
		Schedule:        schedule,
		PullBudget:      c.PullBudget,
		Expected:        expected,
		Observer:        observers{m, newStatusLog(log)},
		History:         h.Sink(),
		HistoryInterval: c.HistoryInterval,
		Logger:          log,
	})
}

// NewWatch returns the browsers' Watch service.
func NewWatch(r *fireloop.Loop) *rpc.Watch { return rpc.NewWatch(r) }

// NewAdmin returns the admin service.
func NewAdmin(e Engine, r *fireloop.Loop) *rpc.Admin {
	if e.Sim == nil {
		return rpc.NewAdmin(nil, r)
	}
	return rpc.NewAdmin(e.Sim, r)
}

// NewPoll returns the /v1/loads handler for polling routers.
func NewPoll(c Config, r *fireloop.Loop) *pollapi.Handler { return pollapi.New(r, c.PollMaxAge) }

// NewMonitor returns the Monitor RPC service.
func NewMonitor(r *fireloop.Loop, log *slog.Logger) *rpc.Monitor { return rpc.NewMonitor(r, log) }

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
