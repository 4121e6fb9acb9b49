package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
)

// TestVersion: `loadreporter version` and `loadreporter --version` print
// the build's one line on stdout and succeed.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"serve", "--version"}, {"watch", "--listen", "x", "-version"}} {
		arg := strings.Join(args, " ")
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, nil, &stdout, &stderr); err != nil {
			t.Errorf("run %s: %v", arg, err)
		}
		if got, want := stdout.String(), buildinfo.String()+"\n"; got != want {
			t.Errorf("run %s printed %q, want %q", arg, got, want)
		}
		if !strings.HasPrefix(stdout.String(), "loadreporter ") || stderr.Len() != 0 {
			t.Errorf("run %s: stdout %q, stderr %q", arg, stdout.String(), stderr.String())
		}
	}
}
