package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/web/humanize"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/web/views"
)

func (h *Handler) serveLive(w http.ResponseWriter, r *http.Request) {
	p := liveModel(h.o.Live.Latest(r.Context()), h.o.Live.RoutersConnected(), h.o.Worker, h.o.Now())
	p.Page = views.Page{
		Title:          "Live",
		Active:         "live",
		StyleHref:      h.style,
		ScriptHref:     h.script,
		RefreshSeconds: int(h.o.Refresh / time.Second),
		Version:        h.o.Version,
	}
	p.WatchIntervalMs = strconv.FormatInt(h.o.WatchInterval.Milliseconds(), 10)
	h.render(w, r, http.StatusOK, views.Live(p))
}

// liveModel formats rep (nil before the first report) for the live page.
// worker stands in for the report's worker until there is a report.
func liveModel(rep *domain.Report, routers int, worker domain.Worker, now time.Time) views.LivePage {
	p := views.LivePage{
		Status:           "NO REPORT",
		StatusClass:      "none",
		Age:              "—",
		ReportTime:       "—",
		Sequence:         "—",
		SourceID:         "—",
		RoutersConnected: humanize.Thousands(int64(routers)),
		Worker:           workerModel(worker),
	}
	if rep == nil {
		return p
	}
	p.HasReport = true
	p.Status = rep.Status.String()
	p.StatusClass = statusClass(rep.Status)
	p.Age = ago(now.Sub(rep.ReportTime))
	p.ReportTime = clock(rep.ReportTime)
	p.ReportTimeISO = rep.ReportTime.UTC().Format(time.RFC3339Nano)
	p.ReportUnixMs = strconv.FormatInt(rep.ReportTime.UnixMilli(), 10)
	p.Sequence = strconv.FormatUint(rep.SequenceID, 10)
	p.SourceID = orDash(rep.SourceInstanceID)
	p.LastError = rep.LastError
	p.Worker = workerModel(rep.Worker)
	for _, rk := range rep.Ranks {
		p.Ranks = append(p.Ranks, rankCard(rk))
	}
	return p
}

func workerModel(w domain.Worker) views.Worker {
	return views.Worker{Addr: orDash(w.Addr), Type: w.Type.String(), Model: orDash(w.Model), Zone: orDash(w.Zone)}
}

func rankCard(rk domain.RankLoad) views.RankCard {
	return views.RankCard{
		Rank:          strconv.FormatInt(rk.DPRank, 10),
		Running:       humanize.Thousands(rk.NumRunningReqs) + " / " + humanize.Thousands(rk.MaxRunningRequests),
		Waiting:       humanize.Thousands(rk.NumWaitingReqs),
		WaitingTokens: humanize.Thousands(rk.NumWaitingUncachedTokens) + " uncached tokens",
		KVUsage:       humanize.Percent(rk.TokenUsage),
		KVBarWidth:    barWidth(rk.TokenUsage),
		KVLevel:       usageLevel(rk.TokenUsage),
		KVTokens:      humanize.Thousands(rk.NumUsedTokens) + " / " + humanize.Thousands(rk.MaxTotalNumTokens) + " tokens",
		Throughput:    humanize.Decimal(rk.GenThroughput) + " tok/s",
		CacheHitRate:  humanize.Percent(rk.CacheHitRate),
		Utilization:   humanize.Percent(rk.Utilization),
	}
}

// barWidth is a 0..1 fraction as a bar length in 0..100.
func barWidth(f float64) string {
	if !(f > 0) { // also NaN
		return "0"
	}
	return strconv.FormatFloat(min(f, 1)*100, 'f', 1, 64)
}

// usageLevel colours a KV usage bar: the cache is comfortable, filling,
// or close to full (new requests will wait or evict).
func usageLevel(f float64) string {
	switch {
	case f >= 0.9:
		return "high"
	case f >= 0.7:
		return "mid"
	}
	return "low"
}

// statusClass is the CSS modifier of a status.
func statusClass(s domain.Status) string {
	switch s {
	case domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable:
		return strings.ToLower(s.String())
	}
	return "none"
}
