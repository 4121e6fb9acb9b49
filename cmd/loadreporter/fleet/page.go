package fleet

import (
	"html/template"
	"net/http"
)

// PageRoute is where the live fleet page is served.
const PageRoute = "GET /{$}"

// page renders the answer once on the server (so the page works without
// JavaScript, refreshed by a <noscript> meta refresh); its script then
// re-fetches /v1/fleet/loads every second and redraws the rows in place.
var page = template.Must(template.New("fleet").Funcs(template.FuncMap{
	"pct": func(f float64) float64 { return min(max(f*100, 0), 100) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loadreporter fleet</title>
<noscript><meta http-equiv="refresh" content="2"></noscript>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{padding:.3em .8em;text-align:left;border-bottom:1px solid #ddd;vertical-align:top}
.state{font-weight:600}.fresh{color:#17803d}.stale{color:#b7791f}.unreachable,.disconnected{color:#c53030}
.bar{display:inline-block;width:80px;height:10px;background:#eee;margin-right:.4em;vertical-align:middle}
.bar i{display:block;height:100%;background:#3182ce}.rank{white-space:nowrap;margin-right:.8em;font-size:12px}
.reason{color:#666;font-size:12px}
</style></head><body>
<h1>Fleet</h1>
<p data-testid="summary">{{.Aggregate.FreshWorkers}} of {{.Aggregate.Workers}} workers fresh</p>
<table><thead><tr><th>Worker</th><th>State</th><th>Report age</th><th>KV usage per rank</th></tr></thead>
<tbody id="workers">{{range .Workers}}<tr data-testid="worker" data-target="{{.Target}}">
<td><a href="{{.Dashboard}}">{{.Target}}</a></td>
<td><span class="state {{.State}}" data-testid="state">{{.State}}</span>{{with .Reason}}<div class="reason">{{.}}</div>{{end}}</td>
<td data-testid="age">{{with .AgeMs}}{{.}} ms{{else}}-{{end}}</td>
<td>{{with .Loads}}{{range .Loads}}<span class="rank" data-testid="rank">[{{.DPRank}}] <span class="bar"><i style="width:{{pct .TokenUsage | printf "%.1f"}}%"></i></span>{{pct .TokenUsage | printf "%.1f"}}%</span>{{end}}{{end}}</td>
</tr>{{end}}</tbody></table>
<script>
(function(){
  const esc = s => String(s).replace(/[&<>"']/g, c => "&#" + c.charCodeAt(0) + ";");
  const pct = f => Math.min(Math.max(f * 100, 0), 100).toFixed(1);
  function row(w) {
    const ranks = ((w.loads && w.loads.loads) || []).map(k =>
      '<span class="rank" data-testid="rank">[' + k.dp_rank + '] <span class="bar"><i style="width:' + pct(k.token_usage) +
      '%"></i></span>' + pct(k.token_usage) + '%</span>').join("");
    return '<tr data-testid="worker" data-target="' + esc(w.target) + '"><td><a href="' + esc(w.dashboard) + '">' + esc(w.target) +
      '</a></td><td><span class="state ' + esc(w.state) + '" data-testid="state">' + esc(w.state) + '</span>' +
      (w.reason ? '<div class="reason">' + esc(w.reason) + '</div>' : '') + '</td><td data-testid="age">' +
      (w.age_ms === null ? '-' : w.age_ms + ' ms') + '</td><td>' + ranks + '</td></tr>';
  }
  async function refresh() {
    try {
      const r = await fetch("/v1/fleet/loads", {cache: "no-store"});
      const a = await r.json();
      document.getElementById("workers").innerHTML = a.workers.map(row).join("");
      document.querySelector('[data-testid="summary"]').textContent =
        a.aggregate.fresh_workers + " of " + a.aggregate.workers + " workers fresh";
    } catch (e) {
      document.querySelector('[data-testid="summary"]').textContent = "fleet view unreachable: " + e;
    }
  }
  setInterval(refresh, 1000);
})();
</script>
</body></html>
`))

func (m *Main) servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = page.Execute(w, m.answer())
}
