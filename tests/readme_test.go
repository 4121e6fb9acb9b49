package tests

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeGetsANewcomerStarted: the README lists what a machine needs
// right after the two set-up commands; the history page's curl example
// computes its timestamp, and the performance page documents make bench's
// knobs; `make run` says that the first build takes a while before it goes
// quiet for it.
func TestReadmeGetsANewcomerStarted(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		b, err := os.ReadFile("../" + path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("README.md")
	setup := strings.Index(readme, "make test                            # the whole test suite")
	prereq := strings.Index(readme, "Prerequisites:")
	firstSection := strings.Index(readme, "\n## ")
	if setup < 0 || prereq < setup || prereq > firstSection {
		t.Errorf("Prerequisites at %d: want it after the set-up commands (%d), before the first section (%d)", prereq, setup, firstSection)
	}
	for path, wants := range map[string][]string{
		"README.md": {"Go 1.26", "PostgreSQL", "CI=true", "Chromium", "tests/peers/setup.sh", ".venv-peers",
			"tests/services.sh", "Node.js and npm", "make generate", "2 minutes"},
		"docs/history.md":     {"$(($(date +%s%3N) - 600000))"},
		"docs/performance.md": {"ROUTERS=", "INTERVAL=", "--conns", "--measure", "--warmup", "--cpuprofile"},
	} {
		doc := read(path)
		for _, want := range wants {
			if !strings.Contains(doc, want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
	}
	for _, path := range documents(t) {
		if m := regexp.MustCompile(`sinceUnixMs\\?"?:\s*\d`).FindString(read(path)); m != "" {
			t.Errorf("%s hard-codes a timestamp: %q", path, m)
		}
	}

	mk := read("Makefile")
	run := regexp.MustCompile(`(?m)^run:\n((?:\t.*\n)+)`).FindStringSubmatch(mk)
	if run == nil || !regexp.MustCompile(`(?s)echo "building loadreporter[^"]*".*\) run \./cmd/loadreporter`).MatchString(run[1]) {
		t.Errorf("make run does not announce the build before go run:\n%s", run)
	}
}

// TestReadmeOpensWithWhatAndWhy: a newcomer reads what loadreporter is and
// why it exists in the first ten lines, with "fire" defined where it is
// first used, and the whole README fits a five-minute read.
func TestReadmeOpensWithWhatAndWhy(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 260 {
		t.Errorf("README.md is %d lines, want at most about 250: move the detail into docs/", len(lines))
	}
	head := strings.Join(lines[:min(10, len(lines))], "\n")
	for _, want := range []string{"router", "per-rank load", "Monitor stream", "/v1/loads", "ORCA", "front mode", "Why:"} {
		if !strings.Contains(head, want) {
			t.Errorf("the README's first ten lines lack %q:\n%s", want, head)
		}
	}
	readme := string(b)
	first := regexp.MustCompile(`(?i)\bfires?\b`).FindStringIndex(readme)
	if first == nil {
		t.Fatal("the README never says fire")
	}
	if def := readme[first[0]:min(len(readme), first[0]+200)]; !strings.Contains(def, "one tick of") || !strings.Contains(def, "single timer") {
		t.Errorf("the README's first use of fire does not define it (one tick of the fire loop's single timer):\n%s", def)
	}
}
