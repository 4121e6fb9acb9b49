package fleet

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/web"
)

// PageRoute is where the live fleet page is served.
const PageRoute = "GET /{$}"

// pageModel is what the page renders: the fleet as the stream's first
// message would send it, plus the script that keeps it current.
type pageModel struct {
	ServerTimeUnixMs int64
	FreshWorkers     int32
	Workers          []pageRow
	// EmptyRow and EmptyRank are rendered into <template>s the script
	// clones for workers and ranks that appear later, so the markup has
	// one source.
	EmptyRow  pageRow
	EmptyRank pageRank
	Script    string
}

type pageRow struct {
	Target, Dashboard, State, Reason, Age string
	Sequence                              uint64
	ReceivedUnixMs                        int64
	Ranks                                 []pageRank
}

type pageRank struct {
	Rank           int32
	Width, Percent string
}

// page renders the fleet once on the server (so it works without
// JavaScript, refreshed by a <noscript> meta refresh); fleet.js then
// follows FleetService/WatchFleet and updates each row in place, finding
// every element by the data-testid rendered here.
var page = template.Must(template.New("fleet").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loadreporter fleet</title>
<noscript><meta http-equiv="refresh" content="2"></noscript>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{padding:.3em .8em;text-align:left;border-bottom:1px solid #ddd;vertical-align:top}
.state{font-weight:600}.fresh{color:#17803d}.stale{color:#b7791f}.unreachable,.disconnected{color:#c53030}
.bar{display:inline-block;width:80px;height:10px;background:#eee;margin-right:.4em;vertical-align:middle}
.bar i{display:block;height:100%;background:#3182ce}.rank{white-space:nowrap;margin-right:.8em;font-size:12px}
.reason{color:#666;font-size:12px}
.indicator{font-size:12px;font-weight:400;margin-left:.6em;padding:.1em .5em;border-radius:1em;background:#eee;color:#555}
.indicator[data-state=live]{background:#e6f4ea;color:#17803d}.indicator[data-state=reconnecting]{background:#fdecea;color:#c53030}
</style></head>
<body data-fleet-root data-server-time-unix-ms="{{.ServerTimeUnixMs}}">
<h1>Fleet <span class="indicator" data-testid="fleet-indicator" data-state="off">not live</span></h1>
<p data-testid="summary">{{.FreshWorkers}} of {{len .Workers}} workers fresh</p>
<table><thead><tr><th>Worker</th><th>State</th><th>Report age</th><th>KV usage per rank</th></tr></thead>
<tbody data-testid="workers">{{range .Workers}}{{template "row" .}}{{end}}</tbody></table>
<template id="worker-row-template">{{template "row" .EmptyRow}}</template>
<template id="rank-template">{{template "rank" .EmptyRank}}</template>
<script src="{{.Script}}" defer></script>
</body></html>
{{define "row"}}<tr data-testid="worker" data-target="{{.Target}}" data-sequence="{{.Sequence}}">
<td><a data-testid="dashboard" href="{{.Dashboard}}">{{.Target}}</a></td>
<td><span class="state {{.State}}" data-testid="state">{{.State}}</span><div class="reason" data-testid="reason"{{if not .Reason}} hidden{{end}}>{{.Reason}}</div></td>
<td data-testid="age" data-received-unix-ms="{{.ReceivedUnixMs}}">{{.Age}}</td>
<td data-testid="ranks">{{range .Ranks}}{{template "rank" .}}{{end}}</td>
</tr>{{end}}
{{define "rank"}}<span class="rank" data-testid="rank" data-rank="{{.Rank}}">[<span data-testid="rank-id">{{.Rank}}</span>] <span class="bar"><i data-testid="rank-kv-bar" style="width:{{.Width}}%"></i></span><span data-testid="rank-kv">{{.Percent}}</span></span>{{end}}
`))

// pageModelOf is the page for the stream's first message msg.
func pageModelOf(msg *lrv1.WatchFleetResponse, script string) pageModel {
	m := pageModel{ServerTimeUnixMs: msg.GetServerTimeUnixMs(), FreshWorkers: msg.GetFreshWorkers(), Script: script,
		Workers: make([]pageRow, len(msg.GetWorkers()))}
	for i, w := range msg.GetWorkers() {
		m.Workers[i] = rowOf(w, msg.GetServerTimeUnixMs())
	}
	return m
}

func rowOf(w *lrv1.FleetWorker, nowMs int64) pageRow {
	r := pageRow{Target: w.GetTarget(), Dashboard: w.GetDashboardUrl(), State: stateName(w.GetState()),
		Reason: w.GetReason(), Age: "-", Sequence: w.GetReport().GetSequenceId(), ReceivedUnixMs: w.GetReceivedUnixMs()}
	if w.GetReport() != nil {
		r.Age = ageText(nowMs - w.GetReceivedUnixMs())
	}
	for _, k := range w.GetReport().GetRanks() {
		r.Ranks = append(r.Ranks, rankOf(k))
	}
	return r
}

func rankOf(k *pb.RankLoad) pageRank {
	pct := min(max(k.GetTokenUsage()*100, 0), 100)
	return pageRank{Rank: k.GetDpRank(), Width: fmt.Sprintf("%.1f", pct), Percent: fmt.Sprintf("%.1f%%", pct)}
}

// stateName is the state as the page and /v1/fleet/loads write it
// (client.State's names: fresh, stale, unreachable, disconnected).
func stateName(s lrv1.FleetWorkerState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "FLEET_WORKER_STATE_"))
}

// ageText is a report age as the page shows it; fleet.js's ageText
// writes the same.
func ageText(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", max(ms, 0))
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

func (m *Main) servePage(w http.ResponseWriter, _ *http.Request) {
	var sent fleetSent
	msg, _ := sent.next(time.Now(), entriesOf(m.fleet), m.cfg.dashboard)
	web.PageHeaders(w.Header(), pageSecurityPolicy)
	_ = page.Execute(w, pageModelOf(msg, m.script))
}

// pageSecurityPolicy lets the page run only fleet.js from this origin, so
// text a hostile worker sends (a reason, a target) can never become a
// script even if escaping failed. Styles may be inline: the page carries
// its own <style> and each bar's width.
const pageSecurityPolicy = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
