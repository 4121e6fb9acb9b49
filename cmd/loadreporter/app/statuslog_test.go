package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

type statusLogHarness struct {
	buf bytes.Buffer
	l   *statusLog
	at  time.Time
}

func newStatusLogHarness() *statusLogHarness {
	h := &statusLogHarness{at: time.Unix(1_800_000_000, 0)}
	h.l = newStatusLog(slog.New(slog.NewTextHandler(&h.buf, nil)))
	return h
}

// fire is one fire a second.
func (h *statusLogHarness) fire(st domain.Status, outcome ports.PullOutcome, msg string) {
	h.at = h.at.Add(time.Second)
	h.l.Fired(ports.FireResult{Outcome: outcome, Report: &domain.Report{Status: st, LastError: msg, ReportTime: h.at}})
}

func (h *statusLogHarness) lines() []string {
	return strings.Split(strings.TrimSpace(h.buf.String()), "\n")
}

// TestStatusLogIsNotOneLinePerFire: an engine down for many fires makes one
// line, and its recovery one more that says how often the error repeated.
func TestStatusLogIsNotOneLinePerFire(t *testing.T) {
	h := newStatusLogHarness()
	h.fire(domain.StatusHealthy, ports.PullOK, "")
	for range 100 {
		h.fire(domain.StatusUnreachable, ports.PullError, "GET …: HTTP 500")
	}
	h.fire(domain.StatusUnreachable, ports.PullTimeout, "load snapshot pull timed out")
	h.fire(domain.StatusHealthy, ports.PullOK, "")
	lines := h.lines()
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), h.buf.String())
	}
	if !strings.Contains(lines[1], "HTTP 500") || !strings.Contains(lines[2], "previous_repeated=99") || !strings.Contains(lines[3], "healthy") {
		t.Fatalf("log:\n%s", h.buf.String())
	}
}

// TestStatusLogFollowsKindsNotWordings: a stalled engine's age and a
// garbage engine's value change every fire; an hour of either is one line
// plus a reminder every statusReminder.
func TestStatusLogFollowsKindsNotWordings(t *testing.T) {
	h := newStatusLogHarness()
	for i := range 3600 {
		h.fire(domain.StatusStale, ports.PullOK, fmt.Sprintf("load snapshot stale by %d ms", 4000+1000*i))
	}
	for i := range 3600 {
		h.fire(domain.StatusUnreachable, ports.PullInvalid, fmt.Sprintf("rank 2: num_running_reqs is a float (%d.5), want an integer", i))
	}
	lines := h.lines()
	perHour := int(time.Hour / statusReminder)
	if want := 2 * perHour; len(lines) != want { // the first line and the reminders, twice
		t.Fatalf("%d lines for two hours of two failure kinds, want %d:\n%s", len(lines), want, strings.Join(lines[:min(len(lines), 8)], "\n"))
	}
	if !strings.Contains(lines[1], "still not healthy") || !strings.Contains(lines[1], "repeated=300") ||
		!strings.Contains(lines[1], "stale by 304000 ms") {
		t.Fatalf("reminder: %s", lines[1])
	}
	if !strings.Contains(lines[perHour], "float (0.5)") || !strings.Contains(lines[perHour], "previous_repeated=") {
		t.Fatalf("the kind change: %s", lines[perHour])
	}
}

// TestStatusLogSaysWhenTheCauseChanges: within one kind of failure, a new
// cause (another rank, the discovery's real answer) is logged within
// causeChangeHold, while measurements that change every fire are not.
func TestStatusLogSaysWhenTheCauseChanges(t *testing.T) {
	h := newStatusLogHarness()
	h.fire(domain.StatusUnreachable, ports.PullError, "finding the load sockets: GET http://127.0.0.1:30000/server_info has not answered yet")
	for range 30 {
		h.fire(domain.StatusUnreachable, ports.PullError, "the engine advertises no load sockets (no kv_events.load_endpoint_port_base): start SGLang with --load-publish-endpoint, or give --zmq-endpoint")
	}
	for range 30 {
		h.fire(domain.StatusUnreachable, ports.PullError, "rank 0 (tcp://127.0.0.1:5557): no load message received yet")
	}
	for range 30 {
		h.fire(domain.StatusUnreachable, ports.PullError, "rank 2 (tcp://127.0.0.1:5559): no load message received yet")
	}
	lines := h.lines()
	if len(lines) != 4 {
		t.Fatalf("%d lines, want the first and one per change of cause:\n%s", len(lines), h.buf.String())
	}
	for i, want := range []string{"has not answered yet", "advertises no load sockets", "rank 0 (tcp://127.0.0.1:5557)", "rank 2 (tcp://127.0.0.1:5559)"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s, want %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "the cause changed") || !strings.Contains(lines[1], "repeated=") {
		t.Errorf("a change of cause does not say so: %s", lines[1])
	}
}
