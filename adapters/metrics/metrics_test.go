package metrics

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func fired(status domain.Status, ranks ...domain.RankLoad) ports.FireResult {
	return ports.FireResult{Report: &domain.Report{Status: status, ReportTime: time.Unix(100, 0), Ranks: ranks}, Outcome: ports.PullOK}
}

func TestLabelledCountersStartAtZero(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	m.History()
	body := scrape(t, m)
	for _, series := range []string{
		`loadreporter_history_dropped_total{reason="buffer_full"} 0`,
		`loadreporter_history_dropped_total{reason="rejected"} 0`,
		`loadreporter_history_dropped_total{reason="closed"} 0`,
		`loadreporter_pulls_total{outcome="timeout"} 0`,
		`loadreporter_reports_total{status="UNREACHABLE"} 0`,
		`loadreporter_reports_dropped_total{kind="monitor"} 0`,
		`loadreporter_sessions{kind="watch"} 0`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s before anything happened", series)
		}
	}
}

func TestRankGaugesFollowTheLatestReport(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	rank := func(r int64, usage float64) domain.RankLoad {
		return domain.RankLoad{DPRank: r, SnapshotTime: time.Unix(100, 0), NumRunningReqs: 3 + r, NumWaitingReqs: 1,
			NumUsedTokens: 500, MaxTotalNumTokens: 1000, TokenUsage: usage, GenThroughput: 42.5}
	}
	m.Fired(fired(domain.StatusHealthy, rank(0, 0.5), rank(1, 0.25)))
	body := scrape(t, m)
	for _, series := range []string{
		`loadreporter_rank_running_reqs{dp_rank="0"} 3`, `loadreporter_rank_running_reqs{dp_rank="1"} 4`,
		`loadreporter_rank_token_usage{dp_rank="1"} 0.25`, `loadreporter_rank_max_total_tokens{dp_rank="0"} 1000`,
		`loadreporter_rank_gen_throughput{dp_rank="0"} 42.5`,
		`loadreporter_report_status{status="HEALTHY"} 1`, `loadreporter_report_status{status="UNREACHABLE"} 0`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s in\n%s", series, grep(body, "loadreporter_r"))
		}
	}

	m.Fired(fired(domain.StatusHealthy, rank(0, 0.5))) // rank 1 left the topology
	if body := scrape(t, m); strings.Contains(body, `dp_rank="1"`) {
		t.Errorf("rank 1 left but still has series:\n%s", grep(body, `dp_rank="1"`))
	}

	m.Fired(fired(domain.StatusUnreachable))
	body = scrape(t, m)
	if strings.Contains(body, `dp_rank="0"`) {
		t.Errorf("an UNREACHABLE report keeps old rank values:\n%s", grep(body, `dp_rank=`))
	}
	if !strings.Contains(body, `loadreporter_report_status{status="UNREACHABLE"} 1`+"\n") {
		t.Errorf("status gauge:\n%s", grep(body, "report_status"))
	}

	// Back after the outage, and then updated in place: a rank's series
	// come back, and a kept handle still writes the series that is scraped.
	m.Fired(fired(domain.StatusHealthy, rank(0, 0.75)))
	m.Fired(fired(domain.StatusHealthy, rank(0, 0.125)))
	if body := scrape(t, m); !strings.Contains(body, `loadreporter_rank_token_usage{dp_rank="0"} 0.125`+"\n") {
		t.Errorf("rank 0 after the outage:\n%s", grep(body, `dp_rank="0"`))
	}
}

func grep(body, what string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, what) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestPhaseSlotSessionsAreReadAtScrape(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	loads := []int{3, 2, 3}
	m.WatchPhaseSlots(func() []int { return loads })
	body := scrape(t, m)
	for _, series := range []string{
		`loadreporter_phase_slot_sessions{slot="0"} 3`, `loadreporter_phase_slot_sessions{slot="1"} 2`,
		`loadreporter_phase_slot_sessions{slot="2"} 3`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s in\n%s", series, grep(body, "phase_slot"))
		}
	}
	loads = []int{3, 3, 3}
	if body := scrape(t, m); !strings.Contains(body, `loadreporter_phase_slot_sessions{slot="1"} 3`+"\n") {
		t.Errorf("not read again at the next scrape:\n%s", grep(body, "phase_slot"))
	}
}

func TestFireLatenessLandsInItsBucket(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	on, late := fired(domain.StatusHealthy), fired(domain.StatusHealthy)
	late.Lateness = 3 * time.Millisecond
	m.Fired(on)
	m.Fired(late)
	body := scrape(t, m)
	for _, series := range []string{
		`loadreporter_fire_lateness_seconds_bucket{le="0.0001"} 1`,
		`loadreporter_fire_lateness_seconds_bucket{le="0.0025"} 1`,
		`loadreporter_fire_lateness_seconds_bucket{le="0.005"} 2`,
		`loadreporter_fire_lateness_seconds_sum 0.003`,
		`loadreporter_fire_lateness_seconds_count 2`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s in\n%s", series, grep(body, "fire_lateness"))
		}
	}
}

// TestHelpNamesEveryLabelValue: the HELP of pulls and sessions lists their
// label values, so every value the code can export must be in it. The
// values come from the code itself, not from the lists the HELP is built
// from, so a constant missing from those lists fails here too.
func TestHelpNamesEveryLabelValue(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	counts := map[string]int{}
	for k := session.Kind(0); k.String() != "unknown"; k++ {
		counts[k.String()] = 1
	}
	m.SessionsChanged(counts)
	for _, o := range pullOutcomeConstants(t) {
		f := fired(domain.StatusHealthy)
		f.Outcome = o
		m.Fired(f)
	}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labelOf := map[string]string{"loadreporter_pulls_total": "outcome", "loadreporter_sessions": "kind"}
	checked := 0
	for _, f := range families {
		label, ok := labelOf[f.GetName()]
		if !ok {
			continue
		}
		checked++
		words := strings.FieldsFunc(f.GetHelp(), func(r rune) bool { return r != '_' && !unicode.IsLetter(r) })
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == label && !slices.Contains(words, l.GetValue()) {
					t.Errorf("%s{%s=%q} is exported, but its HELP does not name it: %q", f.GetName(), label, l.GetValue(), f.GetHelp())
				}
			}
		}
	}
	if checked != len(labelOf) {
		t.Errorf("found %d of the families %v", checked, labelOf)
	}
}

// pullOutcomeConstants reads every PullOutcome constant declared in
// package ports, whether PullOutcomes lists it or not.
func pullOutcomeConstants(t *testing.T) []ports.PullOutcome {
	t.Helper()
	files, err := filepath.Glob("../../ports/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []ports.PullOutcome
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if typ, ok := spec.Type.(*ast.Ident); !ok || typ.Name != "PullOutcome" {
				return false
			}
			for _, v := range spec.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, ports.PullOutcome(s))
				}
			}
			return false
		})
	}
	if len(out) == 0 {
		t.Fatal("no PullOutcome constant found in ../../ports")
	}
	return out
}

// TestHistoryLagIsWhatIsUnwritten: the lag and backlog are read from the
// recorder at each scrape, so they grow while the database is down and
// no batch is written to say so.
func TestHistoryLagIsWhatIsUnwritten(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	b := Backlog{Reports: 35, Bytes: 4096, Lag: 66 * time.Second, LimitBytes: 1 << 20}
	m.WatchRecorder(func() Backlog { return b })
	body := scrape(t, m)
	for _, series := range []string{"loadreporter_history_lag_seconds 66", "loadreporter_history_buffered_reports 35",
		"loadreporter_history_buffered_bytes 4096", "loadreporter_history_buffer_limit_bytes 1.048576e+06"} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s", series)
		}
	}
	b = Backlog{LimitBytes: 1 << 20}
	if body := scrape(t, m); !strings.Contains(body, "loadreporter_history_lag_seconds 0\n") {
		t.Error("the lag does not fall to 0 once the history caught up")
	}
}

// TestHistoryWritesAreTimedAndSplitsCounted: how long the store takes per
// batch, and how often a write timed out and was split, which tell an
// operator that the database has become slower than the write timeout.
func TestHistoryWritesAreTimedAndSplitsCounted(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	h := m.History()
	h.Written(100, time.Second, 300*time.Millisecond)
	h.Written(50, time.Second, 2*time.Second)
	h.Split(150)
	body := scrape(t, m)
	for _, series := range []string{
		"loadreporter_history_written_total 150",
		"loadreporter_history_batches_split_total 1",
		"loadreporter_history_write_duration_seconds_count 2",
		"loadreporter_history_write_duration_seconds_sum 2.3",
		`loadreporter_history_write_duration_seconds_bucket{le="0.5"} 1`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s", series)
		}
	}
}

// TestRetentionPassesAreCounted: what each retention pass removed, and
// the passes that failed, which otherwise only a log line every
// --history-retention pass (10 min) told.
func TestRetentionPassesAreCounted(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	passed := m.Retention()
	passed(120, nil)
	passed(3, errors.New("canceling statement due to lock timeout"))
	passed(0, nil)
	body := scrape(t, m)
	for _, series := range []string{"loadreporter_history_retention_removed_total 123", "loadreporter_history_retention_failures_total 1"} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s in:\n%s", series, body)
		}
	}
	m.Retention()(1, nil) // a second call shares the collectors
	if body := scrape(t, m); !strings.Contains(body, "loadreporter_history_retention_removed_total 124\n") {
		t.Error("a second Retention did not count into the same series")
	}
}

// TestFrontCountsKnownAndUnknownClasses: the series resolved for the known
// classes and the ones looked up for any other class count alike.
func TestFrontCountsKnownAndUnknownClasses(t *testing.T) {
	t.Parallel()
	m := New(time.Now)
	f := m.Front([]string{"generate", "health"})
	f.Proxied("generate", 200, 2*time.Millisecond)
	f.Proxied("generate", 200, 0)
	f.Proxied("surprise", 502, 3*time.Millisecond)
	f.Refused("health")
	f.Refused("surprise")
	f.Refused("surprise")
	f.Scrape(true)
	f.Scrape(true)
	f.Scrape(false)
	body := scrape(t, m)
	for _, series := range []string{
		`loadreporter_front_proxied_requests_total{class="generate",code="200"} 2`,
		`loadreporter_front_proxied_requests_total{class="surprise",code="502"} 1`,
		`loadreporter_front_upstream_header_seconds_count{class="generate"} 1`,
		`loadreporter_front_upstream_header_seconds_count{class="health"} 0`,
		`loadreporter_front_upstream_header_seconds_count{class="surprise"} 1`,
		`loadreporter_front_refused_requests_total{class="generate"} 0`,
		`loadreporter_front_refused_requests_total{class="health"} 1`,
		`loadreporter_front_refused_requests_total{class="surprise"} 2`,
		`loadreporter_front_metrics_scrapes_total{answered="cache"} 2`,
		`loadreporter_front_metrics_scrapes_total{answered="engine"} 1`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("missing %s", series)
		}
	}
}
