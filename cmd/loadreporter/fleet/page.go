package fleet

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/web"
	"github.com/loadreporter/loadreporter/web/humanize"
	"github.com/loadreporter/loadreporter/web/views"
)

// PageRoute is where the live fleet page is served.
const PageRoute = "GET /{$}"

// pageRefreshSeconds is how often the page reloads itself when
// JavaScript is off.
const pageRefreshSeconds = 2

// nav is the fleet page's header: the fleet view serves this page and its
// JSON, nothing of a worker's (each row links to its worker's own pages).
var nav = []views.NavItem{
	{Key: "fleet", Label: "Fleet", Href: "/"},
	{Key: "loads", Label: "JSON", Href: "/v1/fleet/loads"},
}

// The page is rendered from the stream's first message, so it shows what
// the script then keeps current, formatted alike: fleet.ts formats every
// figure as the functions below do (keep the two in step).

// pageModelOf is the page for the stream's first message msg.
func pageModelOf(msg *lrv1.WatchFleetResponse, style, script string) views.FleetPage {
	now := msg.GetServerTimeUnixMs()
	p := views.FleetPage{
		Page: views.Page{Title: "Fleet", Active: "fleet", StyleHref: style, ScriptHref: script,
			RefreshSeconds: pageRefreshSeconds, Version: buildinfo.String(), Brand: "loadreporter fleet", Nav: nav},
		ServerTimeUnixMs: strconv.FormatInt(now, 10),
		Summary:          summaryOf(msg),
		Rows:             make([]views.FleetRow, len(msg.GetWorkers())),
		EmptyRow:         rowOf(&lrv1.FleetWorker{}, now),
	}
	for i, w := range msg.GetWorkers() {
		p.Rows[i] = rowOf(w, now)
	}
	return p
}

// summaryOf is the fleet as a whole in msg.
func summaryOf(msg *lrv1.WatchFleetResponse) views.FleetSummary {
	a := msg.GetAggregate()
	s := views.FleetSummary{
		Fresh:   fmt.Sprintf("%d of %d workers fresh", msg.GetFreshWorkers(), len(msg.GetTargets())),
		Ranks:   humanize.Thousands(int64(a.GetDpRankCount())),
		Running: humanize.Thousands(a.GetTotalRunningReqs()), Waiting: humanize.Thousands(a.GetTotalWaitingReqs()),
		KVUsage: dash, KVBarWidth: "0", KVLevel: "low", KVTokens: humanize.Thousands(a.GetTotalUsedTokens()) + " tokens",
		Throughput: dash, Pending: pendingText(a.GetPendingRequests(), a.GetPendingTokens()),
	}
	if a.GetTotalTokens() > 0 {
		s.KVTokens = humanize.Thousands(a.GetTotalUsedTokens()) + " / " + humanize.Thousands(a.GetTotalTokens()) + " tokens"
	}
	if n := a.GetDpRankCount(); n > 0 {
		s.KVUsage, s.KVBarWidth, s.KVLevel = humanize.Percent(a.GetAvgTokenUsage()), humanize.BarLength(a.GetAvgTokenUsage()), humanize.UsageLevel(a.GetAvgTokenUsage())
		s.Throughput = throughputText(a.GetAvgThroughput() * float64(n))
	}
	return s
}

// dash stands for a figure the worker's report does not give.
const dash = "—"

// rowOf is w's row at nowMs on the server's clock.
func rowOf(w *lrv1.FleetWorker, nowMs int64) views.FleetRow {
	state := stateName(w.GetState())
	r := views.FleetRow{
		Target: w.GetTarget(), Dashboard: w.GetDashboardUrl(), State: state, StateClass: stateClass(state),
		Reason: w.GetReason(), Age: dash, ReceivedUnixMs: "0", Sequence: strconv.FormatUint(w.GetReport().GetSequenceId(), 10),
		EngineAddr: dash, Model: dash, Zone: dash, Running: dash, Waiting: dash, KVUsage: dash, Throughput: dash,
		Pending: pendingText(w.GetPendingRequests(), w.GetPendingTokens()),
		Sort:    views.FleetSort{State: strconv.Itoa(stateOrder(state)), Pending: strconv.FormatInt(w.GetPendingRequests(), 10)},
	}
	rep := w.GetReport()
	if rep == nil {
		return r
	}
	r.Age, r.ReceivedUnixMs = ageText(nowMs-w.GetReceivedUnixMs()), strconv.FormatInt(w.GetReceivedUnixMs(), 10)
	r.Sort.Age = strconv.FormatInt(nowMs-w.GetReceivedUnixMs(), 10)
	r.EngineAddr, r.WorkerType = humanize.OrDash(rep.GetWorker().GetWorkerAddr()), workerTypeName(rep.GetWorker().GetWorkerType())
	r.Model, r.Zone = humanize.OrDash(rep.GetWorker().GetModel()), humanize.OrDash(rep.GetWorker().GetZone())
	ranks := rep.GetRanks()
	if len(ranks) == 0 {
		return r
	}
	var running, maxRunning, waiting int64
	var usage, throughput float64
	for _, k := range ranks {
		running += k.GetNumRunningReqs()
		maxRunning += k.GetMaxRunningRequests()
		waiting += k.GetNumWaitingReqs()
		usage += k.GetTokenUsage()
		throughput += k.GetGenThroughput()
	}
	usage /= float64(len(ranks))
	r.Running = humanize.Thousands(running) + " / " + humanize.Thousands(maxRunning)
	r.Waiting = humanize.Thousands(waiting)
	r.KVUsage = humanize.Percent(usage)
	r.Throughput = throughputText(throughput)
	r.KVBars = kvBars(ranks)
	r.Sort.Running, r.Sort.Waiting = strconv.FormatInt(running, 10), strconv.FormatInt(waiting, 10)
	r.Sort.KV, r.Sort.Throughput = strconv.FormatFloat(usage, 'f', 4, 64), strconv.FormatFloat(throughput, 'f', 1, 64)
	return r
}

// kvBars is one bar per rank, side by side in the row's chart, each as
// tall as the rank's KV usage: however many ranks, they share the chart's
// width, so the row never wraps (fleet.ts's kvBar draws the same).
func kvBars(ranks []*pb.RankLoad) []views.KVBar {
	bars := make([]views.KVBar, len(ranks))
	for i, k := range ranks {
		x, y, w, h := kvBar(i, len(ranks), k.GetTokenUsage())
		bars[i] = views.KVBar{Rank: strconv.Itoa(int(k.GetDpRank())), X: x, Y: y, W: w, H: h,
			Level: humanize.UsageLevel(k.GetTokenUsage()), Title: fmt.Sprintf("rank %d: %s", k.GetDpRank(), humanize.Percent(k.GetTokenUsage()))}
	}
	return bars
}

// kvBar is the geometry of bar i of n for usage, in the chart's viewBox:
// a slot of width/n each, with a gap while bars are wide enough to tell
// apart.
func kvBar(i, n int, usage float64) (x, y, w, h string) {
	slot := float64(views.KVChartWidth) / float64(n)
	gap := 0.0
	if n <= 32 {
		gap = slot * 0.2
	}
	height := humanize.Fraction(usage) * views.KVChartHeight
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	return f(float64(i)*slot + gap/2), f(views.KVChartHeight - height), f(slot - gap), f(height)
}

// throughputText is tokens generated per second, to the token: the
// fleet's and a worker's sums run to tens of thousands.
func throughputText(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dash
	}
	return humanize.Thousands(int64(math.Round(f))) + " tok/s"
}

// pendingText is a worker's pending dispatches: "0", or "3 req · 1,536 tok".
func pendingText(requests, tokens int64) string {
	if requests == 0 && tokens == 0 {
		return "0"
	}
	return humanize.Thousands(requests) + " req · " + humanize.Thousands(tokens) + " tok"
}

// stateName is the state as the page and /v1/fleet/loads write it
// (client.State's names: fresh, stale, unreachable, disconnected).
func stateName(s lrv1.FleetWorkerState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "FLEET_WORKER_STATE_"))
}

// stateClass is the status pill of a state, in the worker's pages' colours.
func stateClass(state string) string {
	switch state {
	case "fresh":
		return "healthy"
	case "stale", "unreachable":
		return state
	}
	return "none"
}

// stateOrder sorts the states from the one a router routes on to the one
// it can do least with.
func stateOrder(state string) int {
	switch state {
	case "fresh":
		return 0
	case "stale":
		return 1
	case "unreachable":
		return 2
	}
	return 3
}

func workerTypeName(t pb.WorkerType) string {
	if t == pb.WorkerType_WORKER_TYPE_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(t.String(), "WORKER_TYPE_"))
}

// ageText is a report age as the page shows it.
func ageText(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", max(ms, 0))
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

func (m *Main) servePage(w http.ResponseWriter, r *http.Request) {
	var sent fleetSent
	msg, _ := sent.next(time.Now(), m.fleet.Standings(), m.cfg.dashboard)
	var buf bytes.Buffer
	if err := views.Fleet(pageModelOf(msg, m.style, m.script)).Render(r.Context(), &buf); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	web.PageHeaders(w.Header(), pageSecurityPolicy)
	_, _ = w.Write(buf.Bytes())
}

// pageSecurityPolicy lets the page run only fleet.js and use only
// style.css, both from this origin, so text a hostile worker sends (a
// reason, a model name) can never become a script or a style even if
// escaping failed; it posts no form.
const pageSecurityPolicy = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
