package envflag

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

type settings struct {
	d     time.Duration
	n     int
	u     uint64
	f     float64
	b     bool
	s     string
	alias time.Duration
}

func newFlags(out *bytes.Buffer) (*flag.FlagSet, *settings, map[string]string) {
	var s settings
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.DurationVar(&s.d, "wait", time.Second, "how long")
	fs.IntVar(&s.n, "count", 0, "how many")
	fs.Uint64Var(&s.u, "seed", 0, "seed")
	fs.Float64Var(&s.f, "ratio", 0.5, "ratio")
	fs.BoolVar(&s.b, "tls", false, "dial with TLS")
	fs.StringVar(&s.s, "name", "", "a name (empty: none)")
	fs.DurationVar(&s.alias, "old-wait", 0, "deprecated")
	extra := map[string]string{"name": "DEMO_NAME", "old-wait": CommandLineOnly}
	fs.Usage = Usage(fs, out, "Usage: demo", extra)
	return fs, &s, extra
}

func TestParseValueErrors(t *testing.T) {
	t.Parallel()
	const hint = " (run 'loadreporter demo --help' for its flags)"
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--wait", "3x"}, nil, `--wait "3x": want a duration like 500ms, 3s or 1m`},
		{[]string{"-wait=3"}, nil, `--wait "3": want a duration like 500ms, 3s or 1m`},
		{[]string{"--count", "1.5"}, nil, `--count "1.5": want a whole number`},
		{[]string{"--seed", "-1"}, nil, `--seed "-1": want a whole number, 0 or more`},
		{[]string{"--ratio", "half"}, nil, `--ratio "half": want a number`},
		{[]string{"--tls=maybe"}, nil, `--tls "maybe": want true or false`},
		{[]string{"--nope"}, nil, `unknown flag --nope`},
		{[]string{"--count"}, nil, `--count needs a value`},
		{nil, map[string]string{"LOADREPORTER_WAIT": "soon"}, `LOADREPORTER_WAIT="soon": want a duration like 500ms, 3s or 1m`},
	} {
		var out bytes.Buffer
		fs, _, extra := newFlags(&out)
		err := Parse(fs, tc.args, func(k string) string { return tc.env[k] }, extra)
		if err == nil || err.Error() != tc.want+hint || out.Len() != 0 {
			t.Errorf("%q %v: %v, printed %q; want %s", tc.args, tc.env, err, out.String(), tc.want)
		}
	}
}

func TestParseSettings(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs, s, extra := newFlags(&out)
	env := map[string]string{"LOADREPORTER_COUNT": "3", "DEMO_NAME": "x", "LOADREPORTER_OLD_WAIT": "9s", "LOADREPORTER_RATIO": "0.25"}
	err := Parse(fs, []string{"--tls", "--ratio", "0.75", "--old-wait", "2s"}, func(k string) string { return env[k] }, extra)
	// A boolean stays a switch; the command line wins; a command-line-only
	// flag ignores its LOADREPORTER_* name.
	if err != nil || !s.b || s.n != 3 || s.s != "x" || s.f != 0.75 || s.alias != 2*time.Second || out.Len() != 0 {
		t.Errorf("%+v, %v, printed %q", *s, err, out.String())
	}
}

func TestParseHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs, _, extra := newFlags(&out)
	if err := Parse(fs, []string{"--help"}, func(string) string { return "" }, extra); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"Usage: demo\n",
		"  --wait\n        how long (default 1s; env LOADREPORTER_WAIT)\n",
		"  --name\n        a name (empty: none) (env LOADREPORTER_NAME, DEMO_NAME)\n",
		"  --old-wait\n        deprecated (default 0s; command line only)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Count(out.String(), "Usage:") != 1 {
		t.Errorf("usage printed %d times", strings.Count(out.String(), "Usage:"))
	}
}

func TestEnvironUnknown(t *testing.T) {
	t.Parallel()
	e := NewEnviron([]string{"LOADREPORTER_STALE_AFTR=1s", "LOADREPORTER_LISTEN=:1", "PATH=/bin", "LOADREPORTER_INTERVAL=1s", "LOADREPORTER_X"})
	if got := e.Unknown("serve"); got != nil {
		t.Errorf("before any flag was read: %q", got)
	}
	for _, name := range []string{"LOADREPORTER_STALE_AFTER", "LOADREPORTER_LISTEN", "LOADREPORTER_HISTORY_INTERVAL",
		"LOADREPORTER_DETAIL_INTERVAL", "LOADREPORTER_LOG_LEVEL", "DATABASE_URL"} {
		e.Getenv(name)
	}
	if e.Getenv("LOADREPORTER_LISTEN") != ":1" || e.Getenv("PATH") != "/bin" {
		t.Error("Getenv does not read the environment")
	}
	want := []string{
		"LOADREPORTER_STALE_AFTR is not a setting of serve and is ignored (closest: LOADREPORTER_STALE_AFTER)",
		"LOADREPORTER_INTERVAL is not a setting of serve and is ignored (closest: LOADREPORTER_DETAIL_INTERVAL, LOADREPORTER_HISTORY_INTERVAL)",
		"LOADREPORTER_X is not a setting of serve and is ignored (closest: LOADREPORTER_LISTEN)",
	}
	if got := e.Unknown("serve"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Unknown:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOnCommandLine(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("tls", false, "")
	fs.String("target", "", "")
	fs.String("targets", "", "")
	args := []string{"--tls", "--target", "a:1"}
	getenv := func(k string) string { return map[string]string{"LOADREPORTER_TARGETS": "b:1"}[k] }
	if err := Parse(fs, args, getenv, nil); err != nil {
		t.Fatal(err)
	}
	got := OnCommandLine(fs, args)
	if !got["tls"] || !got["target"] || got["targets"] {
		t.Fatalf("OnCommandLine = %v, want tls and target only", got)
	}
}

// TestNoArguments: a stray word is refused naming the command; a true or
// false behind a boolean flag says how to write it.
func TestNoArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--migrate", "false"}, "--migrate false: a boolean flag takes its value after =, as --migrate=false"},
		{[]string{"--migrate", "TRUE"}, "as --migrate=true"},
		{[]string{"--name", "x", "false"}, `serve takes no arguments, got ["false"]`},
		{[]string{"--migrate=true", "false"}, `serve takes no arguments, got ["false"]`},
		{[]string{"extra"}, `serve takes no arguments, got ["extra"]`},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.Bool("migrate", true, "")
		fs.String("name", "", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := NoArguments(fs, tc.args, "serve"); err == nil || err.Error() != tc.want && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	if err := fs.Parse(nil); err != nil || NoArguments(fs, nil, "serve") != nil {
		t.Error("no arguments refused")
	}
}

// TestSectionsPrintTheirFlagsInOrder: a sectioned usage prints each
// section's title, then its flags, those it names first in that order and
// the others by name, and the flags declared outside any section last.
func TestSectionsPrintTheirFlagsInOrder(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	secs := NewSections(fs)
	secs.Add("Second first", func(fs *flag.FlagSet) {
		fs.String("zeta", "z", "the last letter")
		fs.String("alpha", "", "the first")
		fs.String("gamma", "", "the third")
	}, "zeta", "unknown")
	secs.Add("Then", func(fs *flag.FlagSet) { fs.Int("beta", 2, "two") })
	fs.Bool("loose", false, "declared outside")
	var out strings.Builder
	secs.Usage(&out, "Usage: x", nil)()
	want := `Usage: x

Flags (each also settable as LOADREPORTER_<NAME>), by section:

Second first:
  --zeta
        the last letter (default z; env LOADREPORTER_ZETA)
  --alpha
        the first (env LOADREPORTER_ALPHA)
  --gamma
        the third (env LOADREPORTER_GAMMA)

Then:
  --beta
        two (default 2; env LOADREPORTER_BETA)

Other:
  --loose
        declared outside (default false; env LOADREPORTER_LOOSE)
`
	if out.String() != want {
		t.Errorf("usage:\n%s\nwant:\n%s", out.String(), want)
	}
	if got := secs.Titles(); !slices.Equal(got, []string{"Second first", "Then"}) {
		t.Errorf("titles %q", got)
	}
}
