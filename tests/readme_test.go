package tests

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeGetsANewcomerStarted: the README lists what a machine needs
// right after the two set-up commands, its curl example computes its
// timestamp, and it documents make bench's knobs; `make run` says that the
// first build takes a while before it goes quiet for it.
func TestReadmeGetsANewcomerStarted(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	setup := strings.Index(readme, "make test                            # the whole test suite")
	prereq := strings.Index(readme, "Prerequisites:")
	firstSection := strings.Index(readme, "\n## ")
	if setup < 0 || prereq < setup || prereq > firstSection {
		t.Errorf("Prerequisites at %d: want it after the set-up commands (%d), before the first section (%d)", prereq, setup, firstSection)
	}
	for _, want := range []string{"Go 1.26", "PostgreSQL", "CI=true", "Chromium", "tests/peers/setup.sh", ".venv-peers",
		"tests/services.sh", "Node.js and npm", "make generate", "2 minutes",
		"$(($(date +%s%3N) - 600000))", "ROUTERS=", "INTERVAL=", "--conns", "--measure", "--warmup", "--cpuprofile"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`sinceUnixMs\\?"?:\s*\d`).FindString(readme); m != "" {
		t.Errorf("README hard-codes a timestamp: %q", m)
	}

	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	run := regexp.MustCompile(`(?m)^run:\n((?:\t.*\n)+)`).FindSubmatch(mk)
	if run == nil || !regexp.MustCompile(`(?s)echo "building loadreporter[^"]*".*\) run \./cmd/loadreporter`).Match(run[1]) {
		t.Errorf("make run does not announce the build before go run:\n%s", run)
	}
}
