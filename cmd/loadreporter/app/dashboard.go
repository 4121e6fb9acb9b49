package app

import (
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/web"
)

// liveView adapts the fire loop to what the dashboard's live page reads.
type liveView struct{ r *fireloop.Loop }

func (l liveView) Latest() *domain.Report { return l.r.Latest() }
func (l liveView) RoutersConnected() int  { return l.r.Count(session.KindMonitor) }

// NewDashboard returns the server-rendered pages (/, /history, /audit).
func NewDashboard(c Config, r *fireloop.Loop, h *History, clk ports.Clock, log *slog.Logger) (*web.Handler, error) {
	wt, err := domain.ParseWorkerType(c.WorkerType)
	if err != nil {
		return nil, err
	}
	var (
		query ports.HistoryQuery
		chart ports.HistoryChart
	)
	if c.HistoryInterval > 0 || c.DatabaseURL != "" {
		query, chart = h.Query, h.Chart
	}
	return web.New(web.Options{
		Live:            liveView{r},
		History:         query,
		Chart:           chart,
		Now:             clk.Now,
		Worker:          domain.Worker{Addr: workerAddr(c), Type: wt, Model: c.Model, Zone: c.Zone},
		HistoryInterval: c.HistoryInterval,
		WatchInterval:   watchInterval(c.Limits),
		Logger:          log,
		Version:         buildinfo.String(),
	})
}

// watchInterval is what the live page asks for: a second, within the
// limits every Watch stream is held to, or the page's stream is refused.
func watchInterval(l session.Limits) time.Duration {
	return min(max(time.Second, l.MinInterval), l.MaxInterval)
}

// workerAddr is --worker-addr, defaulting to the listen address; a
// wildcard host (":8080", "0.0.0.0:8080") says nothing to a fleet-wide
// history, so the machine's host name stands in for it.
func workerAddr(c Config) string {
	if c.WorkerAddr != "" {
		return c.WorkerAddr
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return c.Listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if name, err := os.Hostname(); err == nil && name != "" {
			return net.JoinHostPort(name, port)
		}
	}
	return c.Listen
}
