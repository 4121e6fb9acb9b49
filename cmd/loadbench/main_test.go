package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestPhaseSlotsAutoIsOnePhasePerHundredRouters(t *testing.T) {
	slots, err := parseSlots("1, auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		routers int
		want    []int
	}{
		{100, []int{1}}, // auto is 1 there: measured once
		{1000, []int{1, 10}},
		{10000, []int{1, 100}},
		{50000, []int{1, 100}}, // loadreporter's bound
		{10, []int{1}},
	} {
		if got := scenarioSlots(slots, c.routers); !slices.Equal(got, c.want) {
			t.Errorf("--phase-slots 1,auto at %d routers measures %v, want %v", c.routers, got, c.want)
		}
	}
}

func TestPhaseSlotsRefusesWhatLoadreporterRefuses(t *testing.T) {
	for _, bad := range []string{"0", "101", "auto,x", ""} {
		_, err := parseSlots(bad)
		if err == nil || !strings.Contains(err.Error(), "--phase-slots") {
			t.Errorf("--phase-slots %q: error %v, want one naming the flag", bad, err)
		}
	}
}

// The lost-report figure comes from ours' /metrics; a server without the
// counter (a peer) prints "—", never a zero it did not measure.
func TestDroppedReportsReadsOursCounterOnly(t *testing.T) {
	ours := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP loadreporter_reports_dropped_total x\n"+
			`loadreporter_reports_dropped_total{kind="history"} 7`+"\n"+
			`loadreporter_reports_dropped_total{kind="monitor"} 42`+"\n")
	}))
	defer ours.Close()
	peer := httptest.NewServer(http.NotFoundHandler())
	defer peer.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	if got := droppedReports(addr(ours)); got != 42 {
		t.Errorf("ours: %d, want the monitor kind's 42", got)
	}
	if got := droppedReports(addr(peer)); got != -1 {
		t.Errorf("peer without the counter: %d, want -1", got)
	}
	if got := counted(40, 42); got != 2 {
		t.Errorf("counted(40, 42) = %d", got)
	}
	if got := counted(-1, 42); got != -1 || cell(float64(got)) != "—" {
		t.Errorf("an unknown reading gives %d, printed %q; want -1, —", got, cell(float64(got)))
	}
}
