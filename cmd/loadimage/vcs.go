package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// meta is what the binary, the labels and the tags say about the build.
type meta struct {
	version   string
	revision  string
	modified  bool
	created   time.Time
	arch      string
	sourceURL string
}

// moduleRoot is the directory of the main module's go.mod, so loadimage
// works from any directory of the checkout.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", fmt.Errorf("not inside a Go module: run loadimage from the loadreporter checkout")
	}
	return filepath.Dir(gomod), nil
}

// describe fills what the flags leave open from git, then from the clock:
// without git the version is "(devel)" and the revision "unknown".
func describe(ctx context.Context, root string, c config, getenv func(string) string) (meta, error) {
	m := meta{version: c.version, revision: c.revision, arch: c.arch, sourceURL: c.sourceURL}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	head, headErr := git("log", "-1", "--format=%H %ct")
	var commitTime time.Time
	if headErr == nil {
		rev, secs, _ := strings.Cut(head, " ")
		unix, err := strconv.ParseInt(secs, 10, 64)
		if err != nil {
			return m, fmt.Errorf("git log: commit time %q: %v", secs, err)
		}
		commitTime = time.Unix(unix, 0).UTC()
		status, err := git("status", "--porcelain")
		if err != nil {
			return m, err
		}
		m.modified = status != ""
		if m.revision == "" {
			m.revision = rev
		}
		if m.version == "" {
			tag, _ := git("describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD")
			m.version = goVersion(tag, rev, commitTime, m.modified)
		}
	}
	if m.version == "" {
		m.version = "(devel)"
	}
	if m.revision == "" {
		m.revision = "unknown"
	}
	var err error
	if m.created, err = created(getenv("SOURCE_DATE_EPOCH"), commitTime, time.Now()); err != nil {
		return m, err
	}
	return m, nil
}

// goVersion is the version the go command would stamp for this commit:
// its tag, or the pseudo-version v0.0.0-<UTC commit time>-<12 hex>, with
// "+dirty" when the tree has uncommitted changes.
func goVersion(tag, rev string, commitTime time.Time, modified bool) string {
	v := tag
	if v == "" {
		short := rev
		if len(short) > 12 {
			short = short[:12]
		}
		v = "v0.0.0-" + commitTime.UTC().Format("20060102150405") + "-" + short
	}
	if modified {
		v += "+dirty"
	}
	return v
}

// created is the image's creation time: SOURCE_DATE_EPOCH when set (the
// reproducible-builds convention), else the commit time, else now.
func created(sourceDateEpoch string, commitTime, now time.Time) (time.Time, error) {
	if sourceDateEpoch != "" {
		secs, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970: %v", sourceDateEpoch, err)
		}
		return time.Unix(secs, 0).UTC(), nil
	}
	if !commitTime.IsZero() {
		return commitTime.UTC(), nil
	}
	return now.UTC().Truncate(time.Second), nil
}
