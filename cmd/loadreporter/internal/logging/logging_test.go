package logging

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestLogErrorsAreOneLine: a driver's error that joins its causes with
// "\n\t" (pgx's dial errors) is logged on one line, in both formats.
func TestLogErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	err := errors.New("failed to connect to `user=postgres database=x`:\n\t127.0.0.1:1: connection refused\n\t[::1]:1: connection refused")
	for _, format := range []string{"text", "json"} {
		var out strings.Builder
		f := Defaults()
		f.LogFormat = format
		f.New(&out).Warn("history: write failed", "err", err)
		if got := out.String(); strings.Contains(got, `\n`) || strings.Contains(got, `\t`) ||
			!strings.Contains(got, "database=x`: 127.0.0.1:1: connection refused [::1]:1: connection refused") {
			t.Errorf("%s: %s", format, got)
		}
	}
}

// TestFlags: the two flags parse, a refused value names its flag, json
// writes JSON and the level filters.
func TestFlags(t *testing.T) {
	t.Parallel()
	f := Defaults()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	if err := fs.Parse([]string{"--log-level", "warn", "--log-format", "json"}); err != nil || f.Check() != nil {
		t.Fatalf("%+v %v %v", f, err, f.Check())
	}
	var out strings.Builder
	log := f.New(&out)
	log.Info("not written")
	log.Warn("written", "n", 1)
	var line map[string]any
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil || line["msg"] != "written" || line["level"] != "WARN" {
		t.Fatalf("json log %q: %v", out.String(), err)
	}
	for _, bad := range []Flags{{LogLevel: "loud", LogFormat: "text"}, {LogLevel: "info", LogFormat: "xml"}} {
		err := bad.Check()
		if err == nil || !strings.HasPrefix(err.Error(), "--log-") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
