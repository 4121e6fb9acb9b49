package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/store/memory"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports"
)

// History is the configured history: a store, its queries and, unless
// --history-interval is 0, the recorder the fire loop writes through.
type History struct {
	Store    ports.HistoryStore
	Query    ports.HistoryQuery
	Recorder *recorder.Recorder // nil when history is off
	close    func()
	kind     string
}

// NewHistory opens PostgreSQL when --database-url is set (migrating it
// unless --migrate=false), else a bounded in-memory store.
func NewHistory(c Config, clk ports.Clock, m *metrics.Metrics, log *slog.Logger) (*History, error) {
	h := &History{close: func() {}, kind: "memory"}
	if c.DatabaseURL == "" {
		s := memory.New(memory.Options{Capacity: c.HistoryCapacity})
		h.Store, h.Query = s, s
	} else {
		s, err := postgres.Open(c.DatabaseURL, postgres.Options{})
		if err != nil {
			return nil, fmt.Errorf("--database-url: %w", err)
		}
		if c.Migrate {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			applied, err := postgres.Migrate(ctx, s.DB())
			cancel()
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("migrate %s: %w", envflag.RedactURL(c.DatabaseURL), err)
			}
			if len(applied) > 0 {
				log.Info("history schema migrated", "applied", applied)
			}
		}
		h.Store, h.Query, h.close, h.kind = s, s, s.Close, "postgres"
	}
	if c.HistoryInterval > 0 {
		r, err := recorder.New(recorder.Options{Store: h.Store, Clock: clk, Observer: m.History(), Logger: log})
		if err != nil {
			h.close()
			return nil, err
		}
		h.Recorder = r
	}
	return h, nil
}

// Sink is what the fire loop records into (nil when history is off).
func (h *History) Sink() ports.ReportSink {
	if h.Recorder == nil {
		return nil
	}
	return h.Recorder
}

// Close flushes the recorder within ctx and releases the store.
func (h *History) Close(ctx context.Context) error {
	var err error
	if h.Recorder != nil {
		err = h.Recorder.Close(ctx)
	}
	h.close()
	return err
}

// NewHistoryService returns the HistoryService RPC over the history.
func NewHistoryService(c Config, h *History, clk ports.Clock) *rpc.History {
	return rpc.NewHistory(h.Query, clk.Now, c.HistoryInterval)
}
