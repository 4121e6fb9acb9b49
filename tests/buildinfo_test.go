package tests

import (
	"html"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
)

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestTheBuildIsVisible: /metrics carries a build-info gauge and every
// page's footer the version line, so an operator sees which build a worker
// runs without shelling into it.
func TestTheBuildIsVisible(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), nil)
	metrics := getBody(t, "http://"+m.Addr()+"/metrics")
	if !strings.Contains(metrics, `loadreporter_build_info{goversion="`+runtime.Version()+`"`) {
		t.Errorf("no build info gauge in /metrics")
	}
	for _, page := range []string{"/", "/history", "/audit"} {
		body := getBody(t, "http://"+m.Addr()+page)
		if !strings.Contains(body, `data-testid="version">`+html.EscapeString(buildinfo.String())+"</footer>") {
			t.Errorf("%s: no version footer (%q)", page, buildinfo.String())
		}
	}
}
