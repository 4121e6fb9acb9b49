package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestReadinessFollowsTheEngineWhenAskedTo: by default /readyz says the port
// accepts sessions, whatever the engine does; with --ready-requires-load it
// turns 503 while the engine is unreachable, and back.
func TestReadinessFollowsTheEngineWhenAskedTo(t *testing.T) {
	t.Parallel()
	for _, requires := range []bool{false, true} {
		engine := &countingEngine{ranks: 2}
		c := testConfig()
		c.Server.ReadyRequiresLoad = requires
		c.Poll.MaxAge = 10 * time.Millisecond
		m := startMain(t, c, engine)
		if code, body := readyz(t, m.Addr()); code != http.StatusOK {
			t.Fatalf("requires=%t, engine up: %d %q", requires, code, body)
		}
		engine.fail.Store(true)
		waitLoads(t, m.Addr(), http.StatusServiceUnavailable) // the latest report is the failure
		code, body := readyz(t, m.Addr())
		if !requires && code != http.StatusOK {
			t.Fatalf("default readiness looked at the engine: %d %q", code, body)
		}
		if requires && (code != http.StatusServiceUnavailable || !strings.Contains(body, "unreachable")) {
			t.Fatalf("--ready-requires-load with the engine down: %d %q", code, body)
		}
		engine.fail.Store(false)
		waitLoads(t, m.Addr(), http.StatusOK)
		if code, body := readyz(t, m.Addr()); code != http.StatusOK {
			t.Fatalf("requires=%t, engine back: %d %q", requires, code, body)
		}
	}
}

// TestProbesAnswerAnyHostName: without a token the port refuses pages
// naming an unknown host (DNS rebinding), but the probes and scrapes
// answer whatever name a load balancer or scraper was given.
func TestProbesAnswerAnyHostName(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), &countingEngine{ranks: 2})
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/metrics": http.StatusOK, "/": http.StatusMisdirectedRequest} {
		req, err := http.NewRequest(http.MethodGet, "http://"+m.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "worker-7.lb.example:8080"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s by name: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
