package app

import (
	"context"
	"log/slog"
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
func NewDashboard(hc HistoryConfig, pc PollConfig, limits session.Limits, w domain.Worker, r *fireloop.Loop, h *History,
	clk ports.Clock, log *slog.Logger) (*web.Handler, error) {
	var (
		query ports.HistoryQuery
		chart ports.HistoryChart
	)
	if !hc.off() {
		query, chart = h.Query, h.Chart
	}
	return web.New(web.Options{
		Live:            liveView{r: r, maxAge: pollAge(pc), log: log},
		History:         query,
		Chart:           chart,
		Now:             clk.Now,
		Worker:          w,
		HistoryInterval: hc.Interval,
		WatchInterval:   watchInterval(limits),
		Logger:          log,
		Version:         buildinfo.String(),
	})
}

// pollAge is --poll-max-age, whose 0 means pollapi's default.
func pollAge(c PollConfig) time.Duration {
	if c.MaxAge <= 0 {
		return pollapi.DefaultMaxAge
	}
	return c.MaxAge
}

// watchInterval is what the live page asks for: a second, within the
// limits every Watch stream is held to, or the page's stream is refused.
func watchInterval(l session.Limits) time.Duration {
	return min(max(time.Second, l.MinInterval), l.MaxInterval)
}
