package app

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnvironmentThenFlags(t *testing.T) {
	c, err := ParseServe([]string{"--stale-after", "5s"}, env(map[string]string{
		"LOADREPORTER_LISTEN":      "127.0.0.1:9999",
		"LOADREPORTER_STALE_AFTER": "1s",
		"LOADREPORTER_MAX_LEASE":   "20m",
		"LOADREPORTER_SCHEDULE":    "anchored",
	}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9999" || c.StaleAfter != 5*time.Second || c.Limits.MaxLease != 20*time.Minute || c.Schedule != "anchored" {
		t.Fatalf("config %+v", c)
	}
}

func TestDefaults(t *testing.T) {
	c, err := ParseServe(nil, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	if c.Listen != "127.0.0.1:8080" || c.Source != "sim" || c.PullBudget != time.Second || c.StaleAfter != 3*time.Second ||
		c.Limits != want.Limits || c.Schedule != "aligned" || c.ShutdownGrace != 5*time.Second {
		t.Fatalf("defaults %+v", c)
	}
}

func TestHelpListsEveryFlagWithDefaultAndVariable(t *testing.T) {
	var out bytes.Buffer
	_, err := ParseServe([]string{"--help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"--listen", "default 127.0.0.1:8080", "LOADREPORTER_LISTEN",
		"--source", "--engine-url", "--engine-api-key", "--dp-size", "--stale-after", "default 3s",
		"--pull-budget", "--schedule", "default aligned", "--phase-slots", "LOADREPORTER_PHASE_SLOTS", "--min-report-interval", "default 10ms",
		"--max-report-interval", "default 1m0s", "--min-lease", "--max-lease", "default 10m0s",
		"--max-sessions", "default 10000", "--shutdown-grace", "--worker-addr", "--worker-type",
		"--model", "--zone", "--tls-cert", "--tls-key", "--tls-client-ca", "--auth-token",
		"LOADREPORTER_MAX_REPORT_INTERVAL",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestBadSettingsNameTheirFlag(t *testing.T) {
	cases := map[string][]string{
		"--listen":              {"--listen", "nope"},
		"--source":              {"--source", "ollama"},
		"--engine-url":          {"--source", "sglang-http"},
		"--schedule":            {"--schedule", "random"},
		"--phase-slots":         {"--phase-slots", "0"},
		"--phase-slots 4 needs": {"--schedule", "anchored", "--phase-slots", "4"},
		"--pull-budget":         {"--pull-budget", "0s"},
		"--min-report-interval": {"--min-report-interval", "0s"},
		"--min-report-interval must be a whole number": {"--min-report-interval", "500us"},
		"--stale-after":                          {"--stale-after", "0s"},
		"--zone":                                 {"--zone", "z\xff"},
		"--worker-addr":                          {"--worker-addr", " =x"},
		"--model":                                {"--model", "m\x00"},
		"--max-lease":                            {"--max-lease", "1ms"},
		"--worker-type":                          {"--worker-type", "gpu"},
		"--tls-cert":                             {"--tls-key", "k.pem"},
		"--dp-size":                              {"--dp-size", "-1"},
		"--log-level":                            {"--log-level", "loud"},
		"--shutdown-grace 0s: must be > 0":       {"--shutdown-grace", "0s"},
		"--phase-slots 101: must be in [1, 100]": {"--phase-slots", "101"},
		`--schedule "foo": want aligned or anchored`:                    {"--schedule", "foo"},
		"--max-report-interval 1s is below --min-report-interval 2s":    {"--min-report-interval", "2s", "--max-report-interval", "1s"},
		"--stalled-write-timeout":                                       {"--stalled-write-timeout", "0s"},
		"--max-watch-sessions":                                          {"--max-watch-sessions", "0"},
		"--max-frames-per-second NaN":                                   {"--max-frames-per-second", "NaN"},
		"--max-frames-per-second +Inf":                                  {"--max-frames-per-second", "Inf"},
		"--first-frame-timeout -1s":                                     {"--first-frame-timeout", "-1s"},
		"--history-interval 25h0m0s: want 0 (off), or from 10ms to 24h": {"--history-interval", "25h"},
		"--max-lease must be at most 24h":                               {"--max-lease", "25h"},
		"--max-report-interval must be at most 24h":                     {"--max-report-interval", "25h"},
	}
	for flagName, args := range cases {
		_, err := ParseServe(args, env(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), flagName) {
			t.Errorf("%v: err = %v, want it to name %s", args, err, flagName)
		}
	}
	_, err := ParseServe(nil, env(map[string]string{"LOADREPORTER_PULL_BUDGET": "soon"}), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "LOADREPORTER_PULL_BUDGET") {
		t.Errorf("bad environment value: %v", err)
	}
}

func TestWorkerAddrDefault(t *testing.T) {
	host, _ := os.Hostname()
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "127.0.0.1:8080",
		":8080":          host + ":8080",
		"0.0.0.0:9000":   host + ":9000",
		"[::]:9000":      host + ":9000",
	} {
		if got := workerAddr(Config{Listen: listen}); got != want {
			t.Errorf("listen %s: worker addr %q, want %q", listen, got, want)
		}
	}
	if got := workerAddr(Config{Listen: ":8080", WorkerAddr: "10.0.0.7:30000"}); got != "10.0.0.7:30000" {
		t.Errorf("--worker-addr ignored: %q", got)
	}
}

// TestTokensThatOpenThePortAreCaught: the shipped env file's placeholder
// refuses to start, from the environment or the command line, and an
// --auth-token given empty is said at start.
func TestTokensThatOpenThePortAreCaught(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{env: map[string]string{"LOADREPORTER_AUTH_TOKEN": "change-me-to-a-long-random-string"}},
		{args: []string{"--admin-token", "Change-Me"}},
	} {
		_, err := ParseServe(tc.args, env(tc.env), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "placeholder") || !strings.Contains(err.Error(), "openssl rand") {
			t.Errorf("%v %v: %v, want a refusal naming the placeholder", tc.args, tc.env, err)
		}
	}
	c, err := ParseServe([]string{"--auth-token", ""}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.warnings) != 1 || !strings.Contains(c.warnings[0], "--auth-token was given empty") {
		t.Fatalf("warnings %q", c.warnings)
	}
	var logs bytes.Buffer
	c.Listen, c.LogLevel = "127.0.0.1:0", "warn"
	m, err := InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	m.log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "--auth-token was given empty") {
		t.Fatalf("not said at start:\n%s", logs.String())
	}
	if c, _ := ParseServe(nil, env(nil), &bytes.Buffer{}); len(c.warnings) != 0 {
		t.Fatalf("warnings without --auth-token: %q", c.warnings)
	}
}
