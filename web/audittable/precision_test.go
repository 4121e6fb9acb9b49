package audittable_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/internal/historytest"
)

// TestMillisecondsEverywhere: a store that keeps microseconds and the RPC,
// which carries milliseconds, answer the same outage; both tables write
// the same CSV and JSON, and people read the same text.
func TestMillisecondsEverywhere(t *testing.T) {
	t.Parallel()
	start := t0.Add(123456789 * time.Nanosecond)
	end := t0.Add(1999999 * time.Microsecond)
	precise := audit.Outage{Episode: audit.Episode{Span: audit.Span{WorkerAddr: addrA, Start: start, End: end, Duration: end.Sub(start)},
		LastSeen: start, Reports: 1}, Statuses: []domain.Status{domain.StatusStale}}
	// What the RPC client reads back: times and duration in milliseconds.
	wire := precise
	wire.Start, wire.End, wire.LastSeen = time.UnixMilli(start.UnixMilli()), time.UnixMilli(end.UnixMilli()), time.UnixMilli(start.UnixMilli())
	wire.Duration = time.Duration(precise.Duration.Milliseconds()) * time.Millisecond
	var outs [2][3]string
	for i, o := range []audit.Outage{precise, wire} {
		st := &historytest.Fake{OutagesFunc: func(audit.OutagesQuery) (audit.OutagesResult, error) {
			return audit.OutagesResult{Outages: []audit.Outage{o}}, nil
		}}
		tab := run(t, st, audittable.Query{Name: audittable.Outages})
		var js, text bytes.Buffer
		if err := tab.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		if err := tab.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		outs[i] = [3]string{csvText(t, tab), js.String(), text.String()}
	}
	if outs[0] != outs[1] {
		t.Errorf("from the store:\n%s\nthrough the RPC:\n%s", strings.Join(outs[0][:], "\n"), strings.Join(outs[1][:], "\n"))
	}
	want := addrA + ",2026-11-29T08:00:00.123Z,2026-11-29T08:00:01.999Z,false,1876,STALE,1,\n"
	if _, row, _ := strings.Cut(outs[0][0], "\n"); row != want {
		t.Errorf("CSV row = %q, want %q", row, want)
	}
	if !strings.Contains(outs[0][2], "2026-11-29 08:00:00.123 UTC  2026-11-29 08:00:01.999 UTC  no       1.876 s") {
		t.Errorf("text:\n%s", outs[0][2])
	}
}

// TestOngoingSaysWindowEnd: a run the window's end cut reads as going on
// at the window's end, not as going on now, and its column says so.
func TestOngoingSaysWindowEnd(t *testing.T) {
	t.Parallel()
	for _, name := range []string{audittable.Outages, audittable.Imbalance} {
		tab := run(t, newHistory(), audittable.Query{Name: name, Threshold: 0.4})
		col := slices.IndexFunc(tab.Columns, func(c audittable.Column) bool { return c.Name == "ongoing" })
		if col < 0 || !strings.Contains(tab.Columns[col].Help(), "window's end") {
			t.Fatalf("%s: ongoing column %d, help %q", name, col, tab.Columns[col].Help())
		}
		var texts []string
		for _, row := range tab.Rows {
			texts = append(texts, row[col].Raw+"="+row[col].Text)
		}
		if !slices.Contains(texts, "true=at window end") || !slices.Contains(texts, "false=no") {
			t.Errorf("%s ongoing cells = %q", name, texts)
		}
	}
	if h := (audittable.Column{Name: "start"}).Help(); h != "" {
		t.Errorf("start has help %q", h)
	}
}
