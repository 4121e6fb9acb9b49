package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesPointInward: the core never imports an adapter, the
// composition root or generated transport code; ports import only domain.
func TestDependenciesPointInward(t *testing.T) {
	const module = "github.com/loadreporter/loadreporter/"
	rules := []struct {
		pkgs      string
		forbidden []string
	}{
		{"./domain/...", []string{"adapters/", "cmd/", "gen/", "web/", "ports/porttest"}},
		{"./ports/...", []string{"adapters/", "cmd/", "gen/", "web/"}},
		{"./web/...", []string{"adapters/", "cmd/"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../"+strings.TrimPrefix(r.pkgs, "./")).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "matched no packages") {
				continue
			}
			t.Fatalf("go list %s: %v\n%s", r.pkgs, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range r.forbidden {
				if strings.HasPrefix(dep, module+f) {
					t.Errorf("%s depends on %s", r.pkgs, dep)
				}
			}
		}
	}
}
