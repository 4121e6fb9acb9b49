package tests

import (
	"os"
	"regexp"
	"testing"
)

// TestMakeRunUsesEmbeddedDefaults: `make run` must serve what the README
// promises (simulated engine, in-memory history), so the Makefile must not
// hand the service a database — the test suite's least of all. Tests find
// PostgreSQL through DATABASE_URL or their own default.
func TestMakeRunUsesEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^\s*export\s+DATABASE_URL`, `(?m)^\s*DATABASE_URL\s*[:?+]?=`, `(?m)^\s*export\s*$`} {
		if loc := regexp.MustCompile(re).FindIndex(mk); loc != nil {
			t.Errorf("Makefile sets the service's database (%q): make run would not use the embedded defaults", mk[loc[0]:loc[1]])
		}
	}
}
