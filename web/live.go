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
	// The sparklines' history is read while the latest report is fetched
	// (which may pull the engine).
	from := h.o.Now()
	seeds := make(chan map[int64][]sparkPoint, 1)
	go func() { seeds <- h.sparkSeeds(r.Context(), h.o.Worker.Addr, from) }()
	rep := h.o.Live.Latest(r.Context())
	routers := h.o.Live.RoutersConnected()
	spark := withReport(<-seeds, rep, h.o.WatchInterval)
	p := liveModel(rep, routers, h.o.Worker, h.o.Now(), spark)
	p.SparkWindowMs = strconv.FormatInt(sparkWindow.Milliseconds(), 10)
	p.SparkStepMs = strconv.FormatInt(sparkWindow.Milliseconds()/sparkBuckets, 10)
	p.SparkRing = strconv.Itoa(sparkRing)
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
// worker stands in for the report's worker until there is a report; spark
// holds each rank's recent points for its sparkline.
func liveModel(rep *domain.Report, routers int, worker domain.Worker, now time.Time, spark map[int64][]sparkPoint) views.LivePage {
	p := views.LivePage{
		ServerTimeUnixMs: strconv.FormatInt(now.UnixMilli(), 10),
		Status:           "NO REPORT",
		StatusClass:      "none",
		Age:              "—",
		SnapshotAge:      "—",
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
	p.SourceID = humanize.OrDash(rep.SourceInstanceID)
	p.LastError = rep.LastError
	p.Worker = workerModel(rep.Worker)
	// How old the numbers are: a rank's snapshot lags the report by
	// lag, and both age from the report on. The oldest rank is what a
	// STALE status measured.
	elapsed := max(now.Sub(rep.ReportTime), 0)
	oldest := rep.OldestSnapshotAge()
	if len(rep.Ranks) > 0 {
		p.SnapshotAge = ago(oldest + elapsed)
		p.SnapshotLagMs = strconv.FormatInt(oldest.Milliseconds(), 10)
		p.SnapshotTitle = snapshotTitle(rep.ReportTime.Add(-oldest), oldest)
		p.SnapshotStale = rep.Status == domain.StatusStale
	}
	// The sparklines end now: a report that is not new leaves its lines
	// short of the right edge.
	end := max(now.UnixMilli(), rep.ReportTime.UnixMilli())
	span := sparkSpan(oldestPoint(spark, end), end)
	for _, rk := range rep.Ranks {
		c := rankCard(rk)
		lag := snapshotLag(rep, rk)
		c.Age = ago(lag + elapsed)
		c.LagMs = strconv.FormatInt(lag.Milliseconds(), 10)
		c.AgeTitle = snapshotTitle(rep.ReportTime.Add(-lag), lag)
		c.AgeStale = p.SnapshotStale && lag == oldest
		pts := spark[rk.DPRank]
		c.SparkPoints = encodeSpark(pts)
		var peak int64
		c.SparkKV, c.SparkWaiting, peak = sparkPaths(pts, end, span)
		c.SparkPeak = peakText(peak)
		c.SparkSpan = spanText(span)
		p.Ranks = append(p.Ranks, c)
	}
	return p
}

// snapshotLag is how much older rk's snapshot is than rep (never
// negative: an engine clock a little ahead reads as no lag), to the
// millisecond as the wire carries both.
func snapshotLag(rep *domain.Report, rk domain.RankLoad) time.Duration {
	return max(time.Duration(rep.ReportTime.UnixMilli()-rk.SnapshotTime.UnixMilli())*time.Millisecond, 0)
}

// snapshotTitle is the tooltip of a snapshot's age: when it was taken and
// how far behind the report.
func snapshotTitle(taken time.Time, lag time.Duration) string {
	return "snapshot taken " + clock(taken) + ", " + humanize.Duration(lag) + " before the report"
}

func workerModel(w domain.Worker) views.Worker {
	return views.Worker{Addr: humanize.OrDash(w.Addr), Type: w.Type.String(), Model: humanize.OrDash(w.Model), Zone: humanize.OrDash(w.Zone)}
}

func rankCard(rk domain.RankLoad) views.RankCard {
	return views.RankCard{
		Rank:          strconv.FormatInt(rk.DPRank, 10),
		Running:       humanize.Thousands(rk.NumRunningReqs) + " / " + humanize.Thousands(rk.MaxRunningRequests),
		Waiting:       humanize.Thousands(rk.NumWaitingReqs),
		WaitingTokens: humanize.Thousands(rk.NumWaitingUncachedTokens) + " uncached tokens",
		KVUsage:       humanize.Percent(rk.TokenUsage),
		KVBarWidth:    humanize.BarLength(rk.TokenUsage),
		KVLevel:       humanize.UsageLevel(rk.TokenUsage),
		KVTokens:      humanize.Thousands(rk.NumUsedTokens) + " / " + humanize.Thousands(rk.MaxTotalNumTokens) + " tokens",
		Throughput:    humanize.Decimal(rk.GenThroughput) + " tok/s",
		CacheHitRate:  humanize.Percent(rk.CacheHitRate),
		Utilization:   humanize.Percent(rk.Utilization),
	}
}

// statusClass is the CSS modifier of a status.
func statusClass(s domain.Status) string {
	switch s {
	case domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable:
		return strings.ToLower(s.String())
	}
	return "none"
}
