package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// TestStatusLogIsNotOneLinePerFire: an engine down for many fires makes one
// line, and its recovery one more that says how often the error repeated.
func TestStatusLogIsNotOneLinePerFire(t *testing.T) {
	var buf bytes.Buffer
	l := newStatusLog(slog.New(slog.NewTextHandler(&buf, nil)))
	fire := func(st domain.Status, msg string) {
		l.Fired(ports.FireResult{Report: &domain.Report{Status: st, LastError: msg}})
	}
	fire(domain.StatusHealthy, "")
	for range 1000 {
		fire(domain.StatusUnreachable, "GET …: HTTP 500")
	}
	fire(domain.StatusUnreachable, "load snapshot pull timed out after 1s")
	fire(domain.StatusHealthy, "")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[1], "HTTP 500") || !strings.Contains(lines[2], "previous_repeated=999") || !strings.Contains(lines[3], "healthy") {
		t.Fatalf("log:\n%s", buf.String())
	}
}
