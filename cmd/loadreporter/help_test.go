package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/web"
	"github.com/loadreporter/loadreporter/web/audittable"
)

// runOut runs the binary's entry point and returns its error and what it
// wrote to stdout and stderr.
func runOut(environ []string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, environ, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestHelpGoesToStdout: --help and -h print the command's usage to stdout
// and exit 0 (flag.ErrHelp), as the top-level help does; nothing goes to
// stderr.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--help"}, {"watch", "--help"}, {"audit", "--help"}, {"audit", "gaps", "-h"}, {"migrate", "--help"},
		{"engine-sim", "--help"},
	} {
		stdout, stderr, err := runOut(nil, args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(stdout, "Usage: loadreporter "+args[0]) || stderr != "" {
			t.Errorf("%q: err %v, stdout %.40q, stderr %q", args, err, stdout, stderr)
		}
	}
	if stdout, stderr, err := runOut(nil, "help"); err != nil || !strings.Contains(stdout, "Commands:") || stderr != "" {
		t.Errorf("help: err %v, stdout %.40q, stderr %q", err, stdout, stderr)
	}
}

// TestHelpSaysDefaultOnce: the usage prints each flag's default; its help
// text does not say it again.
func TestHelpSaysDefaultOnce(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "watch", "audit", "migrate", "engine-sim"} {
		stdout, _, _ := runOut(nil, cmd, "--help")
		lines := strings.Split(stdout, "\n")
		flags := 0
		for i, line := range lines {
			if !strings.HasPrefix(line, "  --") || i+1 == len(lines) {
				continue
			}
			flags++
			if n := strings.Count(lines[i+1], "default"); n > 1 {
				t.Errorf("%s %s says default %d times:%s", cmd, strings.TrimSpace(line), n, lines[i+1])
			}
		}
		if flags == 0 {
			t.Errorf("%s --help listed no flags on stdout", cmd)
		}
	}
}

// TestFlagErrorsAreOneLine: a value a flag refuses is one line naming the
// flag (or variable), the value and what is wanted, with a hint to run
// --help; no usage is printed.
func TestFlagErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	const want = `--stale-after "3x": want a duration like 500ms, 3s or 1m (run 'loadreporter serve --help' for its flags)`
	for _, tc := range []struct {
		environ []string
		args    []string
		want    string
	}{
		{nil, []string{"serve", "--stale-after", "3x"}, want},
		{nil, []string{"serve", "--stale-after=3x"}, want},
		{[]string{"LOADREPORTER_STALE_AFTER=3x"}, []string{"serve"},
			`LOADREPORTER_STALE_AFTER="3x": want a duration like 500ms, 3s or 1m (run 'loadreporter serve --help' for its flags)`},
		{nil, []string{"watch", "--count", "many"}, `--count "many": want a whole number (run 'loadreporter watch --help' for its flags)`},
		{nil, []string{"audit", "gaps", "--history-interval", "1"}, `--history-interval "1": want a duration like 500ms, 3s or 1m (run 'loadreporter audit --help' for its flags)`},
		{nil, []string{"migrate", "--nope"}, `unknown flag --nope (run 'loadreporter migrate --help' for its flags)`},
	} {
		stdout, stderr, err := runOut(tc.environ, tc.args...)
		if err == nil || err.Error() != tc.want || stdout != "" || stderr != "" {
			t.Errorf("%q: err %v\nwant %s\nstdout %q, stderr %q", tc.args, err, tc.want, stdout, stderr)
		}
	}
	// A domain error reads without its code.
	_, _, err := runOut(nil, "serve", "--listen", "127.0.0.1:0", "--source", "sglang-http", "--engine-url", "127.0.0.1:30000")
	if got := errorText(err); got != `--engine-url "127.0.0.1:30000": add the scheme, e.g. http://127.0.0.1:30000` {
		t.Errorf("engine URL without a scheme: %q", got)
	}
}

// TestUnknownEnvironmentWarns: a LOADREPORTER_* variable the command does
// not read is named on stderr with the closest one it does.
func TestUnknownEnvironmentWarns(t *testing.T) {
	t.Parallel()
	_, stderr, _ := runOut([]string{"LOADREPORTER_DATABSE_URL=postgres://x", "HOME=/root"}, "migrate", "--help")
	if want := "loadreporter: warning: LOADREPORTER_DATABSE_URL is not a setting of migrate and is ignored (closest: LOADREPORTER_DATABASE_URL)\n"; stderr != want {
		t.Errorf("stderr %q\nwant %q", stderr, want)
	}
	// watch's LOADREPORTER_INTERVAL is not audit's history interval.
	_, stderr, _ = runOut([]string{"LOADREPORTER_INTERVAL=250ms"}, "audit", "gaps", "--help")
	if !strings.Contains(stderr, "LOADREPORTER_INTERVAL is not a setting of audit") || !strings.Contains(stderr, "closest: LOADREPORTER_HISTORY_INTERVAL") {
		t.Errorf("stderr %q", stderr)
	}
	if _, stderr, _ = runOut([]string{"LOADREPORTER_DATABASE_URL=postgres://x", "LOADREPORTER_HISTORY_INTERVAL=2s"}, "audit", "gaps", "--help"); stderr != "" {
		t.Errorf("known variables warned about: %q", stderr)
	}
}

// TestDefaultHistoryInterval: what audit assumes when asking the database
// directly is serve's default --history-interval (and the dashboard's).
func TestDefaultHistoryInterval(t *testing.T) {
	t.Parallel()
	serve := app.DefaultConfig().History.Interval
	for what, d := range map[string]time.Duration{"audittable": audittable.DefaultHistoryInterval, "web": web.DefaultHistoryInterval} {
		if d != serve {
			t.Errorf("%s.DefaultHistoryInterval = %s, serve's default --history-interval %s", what, d, serve)
		}
	}
}
