package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/cli"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// startWorkers boots n simulated workers and returns them and their
// addresses.
func startWorkers(t *testing.T, n int) ([]*app.Main, []string) {
	t.Helper()
	var ms []*app.Main
	var addrs []string
	for range n {
		m := startMain(t, testConfig(), nil)
		ms, addrs = append(ms, m), append(addrs, m.Addr())
	}
	return ms, addrs
}

// setSimMode switches a simulated worker's engine through AdminService.
func setSimMode(t *testing.T, addr, mode string) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://%s/loadreporter.v1.AdminService/SetSimMode", addr),
		"application/json", strings.NewReader(fmt.Sprintf(`{"mode":%q}`, mode)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		t.Fatalf("SetSimMode %s: %d %s", mode, resp.StatusCode, b)
	}
}

// lastLine is the line of the latest complete fleet table in out that
// starts with prefix, or "".
func lastLine(out, prefix string) string {
	i := strings.LastIndex(out, "fleet at ")
	if i < 0 {
		return ""
	}
	for line := range strings.SplitSeq(out[i:], "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// TestWatchFleetTable: watch --targets over three real workers prints a
// table, one line per worker, that sees all three Fresh, then the one put
// into error mode Unreachable while the others stay Fresh.
func TestWatchFleetTable(t *testing.T) {
	t.Parallel()
	_, addrs := startWorkers(t, 3)
	var out sharedtest.LockedBuffer
	cfg, err := cli.ParseWatch([]string{"--targets", strings.Join(addrs, ","), "--interval", fleetInterval.String()},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Watch(ctx, cfg, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	}()

	wait := testCtx(t, 15*time.Second)
	eventually(t, wait, "three fresh workers", func() bool { return strings.Contains(out.String(), "3 of 3 workers fresh") })
	for _, a := range addrs {
		if line := lastLine(out.String(), a); !strings.Contains(line, "fresh") || !strings.Contains(line, "[3] ") {
			t.Fatalf("line of %s: %q in\n%s", a, line, out.String())
		}
	}
	setSimMode(t, addrs[1], "error")
	eventually(t, wait, addrs[1]+" unreachable", func() bool {
		return strings.Contains(lastLine(out.String(), addrs[1]), "unreachable")
	})
	text := out.String()
	if !strings.Contains(lastLine(text, "fleet at "), "2 of 3 workers fresh") || strings.Contains(text, "\x1b[") {
		t.Fatalf("watch printed:\n%s", text)
	}
	for _, a := range []string{addrs[0], addrs[2]} {
		if line := lastLine(text, a); !strings.Contains(line, " fresh ") {
			t.Errorf("line of %s: %q", a, line)
		}
	}
}
