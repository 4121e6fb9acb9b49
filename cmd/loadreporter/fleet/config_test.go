package fleet

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"LOADREPORTER_LISTEN": "127.0.0.1:9"}[k] }
	c, err := Parse([]string{"--targets", "a:1, b:2"}, getenv, &bytes.Buffer{})
	if err != nil || strings.Join(c.Targets, " ") != "a:1 b:2" || c.Listen != "127.0.0.1:9" || c.dashboard("a:1") != "http://a:1/" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, tc := range []struct{ args []string }{
		{nil}, {[]string{"--targets", "a:1,nope"}}, {[]string{"--targets", "a:1", "--listen", "nope"}},
		{[]string{"--targets", "a:1,a:1"}}, {[]string{"--targets", "a:1", "extra"}},
	} {
		if _, err := Parse(tc.args, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", tc.args)
		}
	}
	var out bytes.Buffer
	if _, err := Parse([]string{"--help"}, func(string) string { return "" }, &out); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(out.String(), "Usage: loadreporter fleet") {
		t.Fatalf("--help: %v %q", err, out.String())
	}
}
