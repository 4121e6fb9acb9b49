package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestWatchFlags(t *testing.T) {
	c, err := ParseWatch([]string{"--interval", "250ms"}, env(map[string]string{"LOADREPORTER_TARGET": "10.0.0.1:8080"}), &bytes.Buffer{})
	if err != nil || c.Target != "10.0.0.1:8080" || c.Interval != 250*time.Millisecond {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseWatch([]string{"--target", "nohostport"}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--target") {
		t.Fatalf("err = %v", err)
	}
}
