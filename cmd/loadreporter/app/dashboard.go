package app

import (
	"context"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/web"
)

// liveView adapts the fire loop to what the dashboard's live page reads.
type liveView struct {
	r      *fireloop.Loop
	maxAge time.Duration // --poll-max-age
	log    *slog.Logger
}

// Latest polls like GET /v1/loads: with no router, browser or recorder
// pulling, the page without a script would otherwise show the same old
// report (or none) at every refresh. Polls share one pull per fire and
// their own bound; when the poll is refused the page shows what there is.
func (l liveView) Latest(ctx context.Context) *domain.Report {
	rep, err := l.r.Poll(ctx, l.maxAge)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Debug("live page: no fresh report", "err", err)
		}
		return l.r.Latest()
	}
	return rep
}

func (l liveView) RoutersConnected() int { return l.r.Count(session.KindMonitor) }

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
		Live:            liveView{r: r, maxAge: pollAge(c), log: log},
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

// pollAge is --poll-max-age, whose 0 means pollapi's default.
func pollAge(c Config) time.Duration {
	if c.PollMaxAge <= 0 {
		return pollapi.DefaultMaxAge
	}
	return c.PollMaxAge
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
