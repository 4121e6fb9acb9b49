package audit_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func TestSpread(t *testing.T) {
	t.Parallel()
	r := func(usages ...float64) *domain.Report {
		rep := &domain.Report{}
		for i, u := range usages {
			rep.Ranks = append(rep.Ranks, domain.RankLoad{DPRank: int64(i), TokenUsage: u})
		}
		return rep
	}
	for _, c := range []struct {
		r    *domain.Report
		want float64
	}{
		{r(), 0}, {r(.5), 0}, {r(.25, .75), .5}, {r(.75, .125, .5), .625},
	} {
		if got := audit.Spread(c.r); got != c.want {
			t.Errorf("Spread(%v) = %v, want %v", c.r.Ranks, got, c.want)
		}
	}
}

func TestPercentileMatchesPercentileCont(t *testing.T) {
	t.Parallel()
	// Values from PostgreSQL: SELECT percentile_cont(p) WITHIN GROUP (ORDER BY v) …
	for _, c := range []struct {
		values []float64
		p      float64
		want   float64
	}{
		{[]float64{4, 1, 3, 2}, .95, 3.85},
		{[]float64{4, 1, 3, 2}, .5, 2.5},
		{[]float64{4, 1, 3, 2}, 0, 1},
		{[]float64{4, 1, 3, 2}, 1, 4},
		{[]float64{7}, .95, 7},
	} {
		got := audit.Percentile(append([]float64(nil), c.values...), c.p)
		if math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.values, c.p, got, c.want)
		}
	}
	if got := audit.Percentile(nil, .95); !math.IsNaN(got) {
		t.Errorf("Percentile(none) = %v, want NaN", got)
	}
}

func TestRuns(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var reports []*domain.Report
	// Two interleaved workers; H = healthy, U = unreachable.
	for i, s := range []string{"aH", "bU", "aU", "bU", "aU", "bH", "aH", "bU", "aU"} {
		st := domain.StatusHealthy
		if s[1] == 'U' {
			st = domain.StatusUnreachable
		}
		reports = append(reports, &domain.Report{
			SourceInstanceID: "s", SequenceID: uint64(i), ReportTime: t0.Add(time.Duration(i) * time.Second),
			Worker: domain.Worker{Addr: s[:1]}, Status: st,
		})
	}
	var got []string
	for _, run := range audit.Runs(reports, audit.Unhealthy) {
		var seqs []string
		for _, r := range run.Reports {
			seqs = append(seqs, fmt.Sprint(r.SequenceID))
		}
		end := "ongoing"
		if run.End != nil {
			end = fmt.Sprint(run.End.SequenceID)
		}
		got = append(got, fmt.Sprintf("%s:%s→%s", run.Reports[0].Worker.Addr, strings.Join(seqs, ","), end))
	}
	want := "[b:1,3→5 a:2,4→6 b:7→ongoing a:8→ongoing]"
	if fmt.Sprint(got) != want {
		t.Errorf("Runs = %v, want %s", got, want)
	}
}
