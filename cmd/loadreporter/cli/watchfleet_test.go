package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/client"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func TestWatchTargetsFlag(t *testing.T) {
	t.Parallel()
	c, err := ParseWatch([]string{"--targets", "a:1, b:2,c:3"}, env(nil), &bytes.Buffer{})
	if err != nil || strings.Join(c.Targets, " ") != "a:1 b:2 c:3" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseWatch([]string{"--targets", "a:1,nohostport"}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `--targets: "nohostport"`) {
		t.Fatalf("err = %v", err)
	}
	if c, err := ParseWatch(nil, env(nil), &bytes.Buffer{}); err != nil || c.Targets != nil || c.Target != "127.0.0.1:8080" {
		t.Fatalf("without --targets: %+v %v", c, err)
	}
}

// TestWatchTargetsRefusesEmptyEntries: a --targets list with an empty
// entry, or none, is refused on one line naming the flag, never read as
// no list (which would watch the default --target instead).
func TestWatchTargetsRefusesEmptyEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--targets", ",,,"}, nil},
		{[]string{"--targets", ""}, nil},
		{[]string{"--targets", "a:1,,c:3"}, nil},
		{[]string{"--targets", "a:1,"}, nil},
		{nil, map[string]string{"LOADREPORTER_TARGETS": ",,,"}},
	} {
		c, err := ParseWatch(tc.args, env(tc.env), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "--targets") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q %v: %+v, %v; want a one-line error naming --targets", tc.args, tc.env, c, err)
		}
	}
}

// TestFleetTable: one line per worker with its state, report age and
// ranks; a worker that is not Fresh says why, and a Fresh view past its
// StaleAt reads Stale.
func TestFleetTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rank := func(r int32, running, waiting int64, kv float64) *pb.RankLoad {
		return &pb.RankLoad{DpRank: r, NumRunningReqs: running, NumWaitingReqs: waiting, MaxRunningRequests: 256, TokenUsage: kv}
	}
	report := &pb.LoadReport{Status: pb.ReportStatus_REPORT_STATUS_HEALTHY, Ranks: []*pb.RankLoad{rank(0, 3, 1, 0.25), rank(1, 7, 0, 0.5)}}
	workers := []client.Standing{
		{View: &client.View{Addr: "10.0.0.1:8080", State: client.Fresh, Report: report, ReceivedAt: now.Add(-120 * time.Millisecond), StaleAt: now.Add(time.Second)},
			Pending: client.Pending{Requests: 3, Tokens: 1536}},
		{View: &client.View{Addr: "10.0.0.2:8080", State: client.Fresh, Report: report, ReceivedAt: now.Add(-5 * time.Second), StaleAt: now.Add(-2 * time.Second)}},
		{View: &client.View{Addr: "10.0.0.3:8080", State: client.Disconnected, Reason: "no registered stream: connection refused"}},
	}
	lines := strings.Split(strings.TrimSuffix(FleetTable(now, workers), "\n"), "\n")
	if len(lines) != 5 || lines[0] != "fleet at 10:00:00: 1 of 3 workers fresh" || !strings.Contains(lines[1], "PENDING req/tok  RANKS") {
		t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
	}
	for i, want := range [][]string{
		{"10.0.0.1:8080", "fresh", "120ms", " 3/1536  [0]", "[0] 3/256 w1 kv25.0%", "[1] 7/256 w0 kv50.0%"},
		{"10.0.0.2:8080", "stale", "5s", " 0/0  [0]", "[1] 7/256 w0 kv50.0%", "(no report since 09:59:58.000)"},
		{"10.0.0.3:8080", "disconnected", " - ", " 0/0   (no registered stream: connection refused)"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+2], w) {
				t.Errorf("line %q lacks %q", lines[i+2], w)
			}
		}
	}
	if strings.Contains(lines[2], "(") {
		t.Errorf("a fresh worker gives a reason: %q", lines[2])
	}
}
