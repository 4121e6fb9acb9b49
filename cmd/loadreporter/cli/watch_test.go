package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestWatchFlags(t *testing.T) {
	t.Parallel()
	c, err := ParseWatch([]string{"--interval", "250ms"}, env(map[string]string{"LOADREPORTER_TARGET": "10.0.0.1:8080"}), &bytes.Buffer{})
	if err != nil || c.Target != "10.0.0.1:8080" || c.Interval != 250*time.Millisecond {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseWatch([]string{"--target", "nohostport"}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--target") {
		t.Fatalf("err = %v", err)
	}
}

// TestWatchTargetOrTargets: --target and --targets exclude each other; a
// flag on the command line wins over the other's variable.
func TestWatchTargetOrTargets(t *testing.T) {
	t.Parallel()
	if _, err := ParseWatch([]string{"--target", "a:1", "--targets", "b:1,c:1"}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--target and --targets") {
		t.Fatalf("both on the command line: err = %v", err)
	}
	both := env(map[string]string{"LOADREPORTER_TARGET": "a:1", "LOADREPORTER_TARGETS": "b:1"})
	if _, err := ParseWatch(nil, both, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--target and --targets") {
		t.Fatalf("both in the environment: err = %v", err)
	}
	c, err := ParseWatch([]string{"--targets", "b:1,c:1"}, env(map[string]string{"LOADREPORTER_TARGET": "a:1"}), &bytes.Buffer{})
	if err != nil || len(c.Targets) != 2 {
		t.Fatalf("--targets over LOADREPORTER_TARGET: %+v %v", c.Targets, err)
	}
	// The variable that lost is not judged either.
	if c, err := ParseWatch([]string{"--targets", "b:1"}, env(map[string]string{"LOADREPORTER_TARGET": "nohostport"}), &bytes.Buffer{}); err != nil || len(c.Targets) != 1 {
		t.Fatalf("--targets over a malformed LOADREPORTER_TARGET: %v", err)
	}
	c, err = ParseWatch([]string{"--target", "a:1"}, env(map[string]string{"LOADREPORTER_TARGETS": "b:1"}), &bytes.Buffer{})
	if err != nil || c.Target != "a:1" || len(c.Targets) != 0 {
		t.Fatalf("--target over LOADREPORTER_TARGETS: %q %v %v", c.Target, c.Targets, err)
	}
}
