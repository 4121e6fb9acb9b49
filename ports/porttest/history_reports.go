package porttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func testReportsFilters(t *testing.T, s Store) {
	cases := []struct {
		name string
		q    audit.ReportsQuery
		want []string
	}{
		{"worker and status", audit.ReportsQuery{Window: full, Workers: []string{w1}, Statuses: []domain.Status{U}},
			[]string{"src-a#4", "src-a#5", "src-b#2"}},
		{"two statuses", audit.ReportsQuery{Window: full, Statuses: []domain.Status{S, U}},
			[]string{"src-c#1", "src-a#3", "src-a#4", "src-a#5", "src-b#2", "src-b#3"}},
		{"two workers", audit.ReportsQuery{Window: full, Workers: []string{w2, w1}, Statuses: []domain.Status{H}, Limit: 3},
			[]string{"src-a#1", "src-a#2", "src-c#2"}},
		{"unknown worker", audit.ReportsQuery{Window: full, Workers: []string{"10.9.9.9:1"}}, nil},
		{"half-open window", audit.ReportsQuery{Window: audit.Window{Since: at(1), Until: at(4)}},
			[]string{"src-a#2", "src-c#2", "src-a#3", "src-c#3", "src-a#4"}},
		{"window in another zone", audit.ReportsQuery{Window: audit.Window{Since: at(20).In(zone5), Until: at(30).In(zone5)}},
			[]string{"src-b#1", "src-b#2", "src-b#3"}},
	}
	for _, c := range cases {
		page := mustReports(t, s, c.q)
		equalLines(t, c.name, labels(page.Reports), c.want)
	}

	// Ranks filter: trims ranks, keeps every report.
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Workers: []string{w2}, Ranks: []int64{2, 0}})
	var got []string
	for _, r := range page.Reports {
		var dps []string
		for _, k := range r.Ranks {
			dps = append(dps, fmt.Sprintf("%d:%g", k.DPRank, k.TokenUsage))
		}
		got = append(got, label(r)+" "+strings.Join(dps, ","))
	}
	equalLines(t, "ranks 0 and 2 of worker 2", got, []string{
		"src-c#1 ", "src-c#2 0:0.125,2:0.5", "src-c#3 0:0.25,2:0.25", "src-c#4 0:0.5,2:0.5", "src-c#5 0:0.75,2:0.5",
	})
	page = mustReports(t, s, audit.ReportsQuery{Window: full, Workers: []string{w1}, Ranks: []int64{2}, Limit: 4})
	for _, r := range page.Reports {
		if len(r.Ranks) != 0 {
			t.Errorf("%s has ranks %v; worker 1 has no rank 2", label(r), r.Ranks)
		}
	}
	equalLines(t, "worker 1, rank 2 (none)", labels(page.Reports), []string{"src-a#1", "src-a#2", "src-a#3", "src-a#4"})
}

func testPaging(t *testing.T, s Store) {
	for _, desc := range []bool{false, true} {
		for _, size := range []int{1, 3, 16, 17} {
			q := audit.ReportsQuery{Window: full, Limit: size, Descending: desc}
			var got []string
			for pages := 0; ; pages++ {
				if pages > len(fixtureOrder) {
					t.Fatalf("desc=%t size=%d: paging does not end", desc, size)
				}
				page := mustReports(t, s, q)
				if len(page.Reports) > size {
					t.Fatalf("desc=%t size=%d: page of %d", desc, size, len(page.Reports))
				}
				got = append(got, labels(page.Reports)...)
				if page.NextCursor == "" {
					break
				}
				if len(page.Reports) != size {
					t.Errorf("desc=%t size=%d: short page (%d) with a next cursor", desc, size, len(page.Reports))
				}
				q.Cursor = page.NextCursor
			}
			want := slices.Clone(fixtureOrder)
			if desc {
				slices.Reverse(want)
			}
			equalLines(t, fmt.Sprintf("pages desc=%t size=%d", desc, size), got, want)
		}
	}
	// Paging with filters.
	q := audit.ReportsQuery{Window: full, Workers: []string{w1}, Statuses: []domain.Status{H}, Limit: 2}
	var got []string
	for {
		page := mustReports(t, s, q)
		got = append(got, labels(page.Reports)...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	equalLines(t, "filtered pages", got, []string{"src-a#1", "src-a#2", "src-a#6", "src-a#7", "src-a#8", "src-b#1"})

	// A cursor is tied to its order.
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Limit: 2})
	_, err := s.Reports(ctxFor(t), audit.ReportsQuery{Window: full, Limit: 2, Cursor: page.NextCursor, Descending: true})
	wantInvalid(t, "cursor used with the other order", err, "cursor")
}
