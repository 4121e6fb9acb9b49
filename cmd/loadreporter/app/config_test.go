package app

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain/session"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnvironmentThenFlags(t *testing.T) {
	c, err := ParseServe([]string{"--stale-after", "5s"}, env(map[string]string{
		"LOADREPORTER_LISTEN":          "127.0.0.1:9999",
		"LOADREPORTER_STALE_AFTER":     "1s",
		"LOADREPORTER_MAX_LEASE":       "20m",
		"LOADREPORTER_SCHEDULE":        "anchored",
		"LOADREPORTER_DETAIL_INTERVAL": "3s",
	}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:9999" || c.Fire.StaleAfter != 5*time.Second || c.Sessions.MaxLease != 20*time.Minute ||
		c.Fire.Schedule != "anchored" || c.Source.ZMQ.DetailInterval != 3*time.Second {
		t.Fatalf("config %+v", c)
	}
}

func TestDefaults(t *testing.T) {
	c, err := ParseServe(nil, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	if c.Server.Listen != "127.0.0.1:8080" || c.Source.Name != "sim" || c.Fire.PullBudget != time.Second || c.Fire.StaleAfter != 3*time.Second ||
		c.Sessions != want.Sessions || c.Fire.Schedule != "aligned" || c.Server.ShutdownGrace != 5*time.Second ||
		c.Source.Sim.Mode != "normal" || c.Source.ZMQ.DetailInterval != time.Second {
		t.Fatalf("defaults %+v", c)
	}
}

// serveHelp is `serve --help`.
func serveHelp(t *testing.T) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := ParseServe([]string{"--help"}, env(nil), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	return out.String()
}

func TestHelpListsEveryFlagWithDefaultAndVariable(t *testing.T) {
	help := serveHelp(t)
	for _, want := range []string{
		"--listen", "default 127.0.0.1:8080", "LOADREPORTER_LISTEN",
		"--source", "--engine-url", "--engine-api-key", "--dp-size", "--stale-after", "default 3s",
		"--pull-budget", "--schedule", "default aligned", "--phase-slots", "LOADREPORTER_PHASE_SLOTS", "--min-report-interval", "default 10ms",
		"--max-report-interval", "default 1m0s", "--min-lease", "--max-lease", "default 10m0s",
		"--max-sessions", "default 10000", "--shutdown-grace", "--worker-addr", "--worker-type",
		"--model", "--zone", "--tls-cert", "--tls-key", "--tls-client-ca", "--auth-token",
		"LOADREPORTER_MAX_REPORT_INTERVAL", "env LOADREPORTER_DATABASE_URL, DATABASE_URL",
		"snapshot source: sim, sglang-http, sglang-grpc, sglang-zmq or vllm-metrics",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestHelpIsInSections: --help prints every flag once, in sections, the
// source and the port first, each source's own flags under its name, and
// no flag outside a section.
func TestHelpIsInSections(t *testing.T) {
	help := serveHelp(t)
	titles := regexp.MustCompile(`(?m)^([A-Z][^\n]*):$`).FindAllStringSubmatch(help, -1)
	var got []string
	for _, m := range titles[1:] { // after "Flags (…), by section"
		got = append(got, m[1])
	}
	want := []string{"Source (where the load is read)", "Source sim", "Source sglang-zmq", "Source vllm-metrics", "Server (the one port)"}
	if len(got) < len(want)+5 || !slices.Equal(got[:len(want)], want) || slices.Contains(got, "Other") {
		t.Fatalf("sections %q, want them to start with %q and every flag in one", got, want)
	}
	first := regexp.MustCompile(`(?m)^  --([a-z-]+)$`).FindAllStringSubmatch(help, -1)
	var flags []string
	for _, m := range first {
		flags = append(flags, m[1])
	}
	if !slices.Equal(flags[:4], []string{"source", "engine-url", "engine-api-key", "dp-size"}) {
		t.Errorf("first flags %q, want source, engine-url, engine-api-key, dp-size", flags[:4])
	}
	sorted := slices.Clone(flags)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(flags) {
		t.Errorf("a flag is printed twice: %q", flags)
	}
	section := func(flag string) string {
		at := strings.Index(help, "\n  --"+flag+"\n")
		title := ""
		for _, m := range regexp.MustCompile(`(?m)^([A-Z][^\n]*):$`).FindAllStringSubmatchIndex(help, -1) {
			if m[0] < at {
				title = help[m[2]:m[3]]
			}
		}
		return title
	}
	for flag, want := range map[string]string{
		"zmq-endpoint": "Source sglang-zmq", "vllm-max-running-requests": "Source vllm-metrics", "sim-mode": "Source sim",
		"tls-cert": "Security (TLS and tokens)", "database-url": "History (what is recorded, and where)",
		"first-frame-timeout": "Streams (what one peer may cost)", "log-level": "Logs",
	} {
		if got := section(flag); got != want {
			t.Errorf("--%s is in section %q, want %q", flag, got, want)
		}
	}
}

// check parses args as serve does and builds the service, as the binary
// does before it serves: a bad setting is refused by ParseServe or by the
// constructor it configures.
func check(args []string, getenv func(string) string) error {
	c, err := ParseServe(args, getenv, io.Discard)
	if err != nil {
		return err
	}
	if !slices.Contains(args, "--listen") {
		c.Server.Listen = "127.0.0.1:0"
	}
	if !slices.Contains(args, "--log-level") {
		c.Logs.LogLevel = "error"
	}
	m, err := InitializeMain(c)
	if err != nil {
		return err
	}
	return m.Close()
}

func TestBadSettingsNameTheirFlag(t *testing.T) {
	cases := map[string][]string{
		`--listen "nope": want HOST:PORT`: {"--listen", "nope"},
		`--source "ollama": want sim, sglang-http, sglang-grpc, sglang-zmq or vllm-metrics`: {"--source", "ollama"},
		"--engine-url":                   {"--source", "sglang-http"},
		"--schedule":                     {"--schedule", "random"},
		"--phase-slots 4 needs":          {"--schedule", "anchored", "--phase-slots", "4"},
		"--pull-budget -1s: must be > 0": {"--pull-budget", "-1s"},
		"--min-report-interval 0s: must be a whole number":                   {"--min-report-interval", "0s"},
		"--min-report-interval 500µs: must be a whole number":                {"--min-report-interval", "500us"},
		"--stale-after 0s: must be > 0":                                      {"--stale-after", "0s"},
		`--zone "z\xff": must be UTF-8 text without NUL`:                     {"--zone", "z\xff"},
		`--worker-addr " =x": must not start or end`:                         {"--worker-addr", " =x"},
		`--model "m\x00": must be UTF-8`:                                     {"--model", "m\x00"},
		"--max-lease 1ms is below min-lease":                                 {"--max-lease", "1ms"},
		`--worker-type "gpu": want regular, prefill or decode`:               {"--worker-type", "gpu"},
		"--tls-cert and --tls-key go together":                               {"--tls-key", "k.pem"},
		"--tls-client-ca needs --tls-cert":                                   {"--tls-client-ca", "ca.pem"},
		"--dp-size -1: want 0 (learn) to 1024":                               {"--dp-size", "-1"},
		"--dp-size 2000: want 0 (learn) to 1024":                             {"--dp-size", "2000"},
		"--max-dp-size 5000: want 1 to 4096":                                 {"--max-dp-size", "5000"},
		`--log-level "loud"`:                                                 {"--log-level", "loud"},
		"--shutdown-grace 0s: must be > 0":                                   {"--shutdown-grace", "0s"},
		"--final-write-timeout 5s: must be below --shutdown-grace 5s":        {"--final-write-timeout", "5s"},
		`--phase-slots "101": want auto or a number of phases from 0 to 100`: {"--phase-slots", "101"},
		`--phase-slots "-1": want auto or a number of phases`:                {"--phase-slots", "-1"},
		"want auto or a number of phases from 0 to 100":                      {"--phase-slots", "many"},
		`--schedule "foo": want aligned or anchored`:                         {"--schedule", "foo"},
		"--max-report-interval 1s is below min-report-interval 2s":           {"--min-report-interval", "2s", "--max-report-interval", "1s"},
		"--stalled-write-timeout":                                            {"--stalled-write-timeout", "0s"},
		"--max-watch-sessions 0: must be > 0":                                {"--max-watch-sessions", "0"},
		"--max-frames-per-second NaN":                                        {"--max-frames-per-second", "NaN"},
		"--max-frames-per-second +Inf":                                       {"--max-frames-per-second", "Inf"},
		"--first-frame-timeout -1s":                                          {"--first-frame-timeout", "-1s"},
		"--history-interval 25h0m0s: want 0 (off), or from 10ms to 24h":      {"--history-interval", "25h"},
		"--history-retention -1h0m0s: must be > 0":                           {"--history-retention", "-1h"},
		"--history-capacity -1: must be > 0":                                 {"--history-capacity", "-1"},
		"--poll-max-age -1s: must not be negative":                           {"--poll-max-age", "-1s"},
		`--get-load-shape "trtllm": want one of [sglang vllm]`:               {"--get-load-shape", "trtllm"},
		`--auth-scope "routers": want all or operators`:                      {"--auth-scope", "routers"},
		"--max-lease 25h0m0s: must be at most 24h":                           {"--max-lease", "25h"},
		"--max-report-interval 25h0m0s: must be at most 24h":                 {"--max-report-interval", "25h"},
		`--sim-mode: sim mode "wobbly"`:                                      {"--sim-mode", "wobbly"},
		"--vllm-max-running-requests -1: must not be negative":               {"--source", "vllm-metrics", "--engine-url", "http://127.0.0.1:1", "--vllm-max-running-requests", "-1"},
		"--zmq-max-running-requests -1: must not be negative":                {"--source", "sglang-zmq", "--zmq-endpoint", "tcp://127.0.0.1:5558", "--dp-size", "1", "--zmq-max-running-requests", "-1"},
		"--detail-interval must be ≥ 0":                                      {"--source", "sglang-zmq", "--engine-url", "http://127.0.0.1:1", "--detail-interval", "-1s"},
		`--database-url a mysql:// URL`:                                      {"--database-url", "mysql://x"},
		"--front-listen needs --front-engine-url or --engine-url":            {"--front-listen", "127.0.0.1:0"},
	}
	for want, args := range cases {
		if err := check(args, env(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %s", args, err, want)
		}
	}
	if err := check(nil, env(map[string]string{"LOADREPORTER_PULL_BUDGET": "soon"})); err == nil ||
		!strings.Contains(err.Error(), "LOADREPORTER_PULL_BUDGET") {
		t.Errorf("bad environment value: %v", err)
	}
	// What the constructors take as their defaults.
	for _, args := range [][]string{{"--pull-budget", "0s"}, {"--phase-slots", "0"}, {"--phase-slots", "auto"}, {"--schedule", "anchored"}, {"--history-capacity", "0"}, {"--history-retention", "0s"}} {
		if err := check(args, env(nil)); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// TestEveryOptionMapsToAFlag: each row of optionFlags names a flag serve
// declares.
func TestEveryOptionMapsToAFlag(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.register(fs)
	for option, name := range optionFlags {
		if fs.Lookup(name) == nil {
			t.Errorf("option %s maps to --%s, which serve does not declare", option, name)
		}
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
		if got := workerAddr("", listen); got != want {
			t.Errorf("listen %s: worker addr %q, want %q", listen, got, want)
		}
	}
	if got := workerAddr("10.0.0.7:30000", ":8080"); got != "10.0.0.7:30000" {
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
		err := check(tc.args, env(tc.env))
		if err == nil || !strings.Contains(err.Error(), "placeholder") || !strings.Contains(err.Error(), "openssl rand") {
			t.Errorf("%v %v: %v, want a refusal naming the placeholder", tc.args, tc.env, err)
		}
	}
	c, err := ParseServe([]string{"--auth-token", ""}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Security.warnings) != 1 || !strings.Contains(c.Security.warnings[0], "--auth-token was given empty") {
		t.Fatalf("warnings %q", c.Security.warnings)
	}
	var logs bytes.Buffer
	c.Server.Listen, c.Logs.LogLevel = "127.0.0.1:0", "warn"
	m, err := InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	m.p.Log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "--auth-token was given empty") {
		t.Fatalf("not said at start:\n%s", logs.String())
	}
	if c, _ := ParseServe(nil, env(nil), &bytes.Buffer{}); len(c.Security.warnings) != 0 {
		t.Fatalf("warnings without --auth-token: %q", c.Security.warnings)
	}
}

// TestWeakTokensAreSaidAtStart: a short token, and an admin token equal to
// the routers', start but are said in the log.
func TestWeakTokensAreSaidAtStart(t *testing.T) {
	for _, tc := range []struct {
		sec  SecurityConfig
		want string
	}{
		{SecurityConfig{AuthScope: AuthScopeAll, AuthToken: "x"}, "--auth-token is 1 characters"},
		{SecurityConfig{AuthScope: AuthScopeAll, AuthToken: "0123456789abcdef0123", AdminToken: "0123456789abcdef0123"}, "--admin-token equals --auth-token"},
	} {
		a, err := NewAccess(tc.sec, ServerConfig{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(a.warnings(), "\n"); !strings.Contains(w, tc.want) {
			t.Errorf("%+v: warnings %q, want %q", tc.sec, w, tc.want)
		}
	}
	a, err := NewAccess(SecurityConfig{AuthScope: AuthScopeAll, AuthToken: "0123456789abcdef0123"}, ServerConfig{Listen: "127.0.0.1:0"})
	if err != nil || len(a.warnings()) != 0 {
		t.Fatalf("a long token: %v %q", err, a.warnings())
	}
}

// TestPhaseSlotsDefaultToAuto: the phases are chosen from the session
// count unless --phase-slots says otherwise.
func TestPhaseSlotsDefaultToAuto(t *testing.T) {
	if got := DefaultConfig().Fire.PhaseSlots; got != session.AutoPhaseSlots {
		t.Errorf("default --phase-slots %d, want auto", got)
	}
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.Fire.register(fs)
	if got := fs.Lookup("phase-slots").DefValue; got != "auto" {
		t.Errorf("--phase-slots shows default %q, want auto", got)
	}
	if err := fs.Parse([]string{"--phase-slots", "4"}); err != nil || c.Fire.PhaseSlots != 4 {
		t.Errorf("--phase-slots 4: %v, %d", err, c.Fire.PhaseSlots)
	}
}
