package fleet

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

func TestParse(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string { return map[string]string{"LOADREPORTER_LISTEN": "127.0.0.1:9"}[k] }
	c, err := Parse([]string{"--targets", "a:1, b:2"}, getenv, &bytes.Buffer{})
	if err != nil || strings.Join(c.Targets, " ") != "a:1 b:2" || c.Listen != "127.0.0.1:9" || c.dashboard("a:1") != "http://a:1/" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, tc := range []struct{ args []string }{
		{nil}, {[]string{"--targets", "a:1,nope"}}, {[]string{"--targets", "a:1", "--listen", "nope"}},
		{[]string{"--targets", "a:1,a:1"}}, {[]string{"--targets", "a:1", "extra"}},
		{[]string{"--targets", "a:1", "--max-watch-sessions", "0"}}, {[]string{"--targets", "a:1", "--stalled-write-timeout", "0s"}},
		{[]string{"--targets", "a:1", "--final-write-timeout", "5s"}}, {[]string{"--targets", "a:1", "--log-format", "xml"}},
		{[]string{"--targets", "a:1", "--max-streams-per-conn", "0"}}, {[]string{"--targets", "a:1", "--request-body-timeout", "0s"}},
	} {
		if _, err := Parse(tc.args, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", tc.args)
		}
	}
	// serve's limits, under serve's names and defaults.
	serve, err := app.ParseServe(nil, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != serve.Streams.Port || c.Flags != serve.Logs || c.MaxWatchSessions != serve.Sessions.MaxWatchSessions ||
		c.ShutdownGrace != serve.Server.ShutdownGrace || c.FinalWriteTimeout != serve.Streams.Monitor.FinalWriteTimeout {
		t.Fatalf("fleet's defaults %+v differ from serve's %+v", c, serve)
	}
	c, err = Parse([]string{"--targets", "a:1", "--log-format", "json", "--log-level", "debug", "--max-watch-sessions", "3",
		"--stalled-write-timeout", "2s", "--max-streams-per-conn", "7", "--request-body-timeout", "3s",
		"--shutdown-grace", "9s", "--final-write-timeout", "4s"}, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil || c.LogFormat != "json" || c.LogLevel != "debug" || c.MaxWatchSessions != 3 || c.StalledWriteTimeout != 2*time.Second ||
		c.MaxStreamsPerConn != 7 || c.RequestBodyTimeout != 3*time.Second || c.ShutdownGrace != 9*time.Second || c.FinalWriteTimeout != 4*time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	var out bytes.Buffer
	if _, err := Parse([]string{"--help"}, func(string) string { return "" }, &out); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(out.String(), "Usage: loadreporter fleet") {
		t.Fatalf("--help: %v %q", err, out.String())
	}
}
