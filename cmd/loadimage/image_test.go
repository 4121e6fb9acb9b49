package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var commit = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestGoVersion(t *testing.T) {
	t.Parallel()
	const rev = "abcdef1234567890abcdef1234567890abcdef12"
	cases := []struct {
		tag      string
		modified bool
		want     string
	}{
		{"", false, "v0.0.0-20261130120000-abcdef123456"},
		{"", true, "v0.0.0-20261130120000-abcdef123456+dirty"},
		{"v1.2.3", false, "v1.2.3"},
		{"v1.2.3", true, "v1.2.3+dirty"},
	}
	for _, c := range cases {
		if got := goVersion(c.tag, rev, commit, c.modified); got != c.want {
			t.Errorf("goVersion(%q, modified %v) = %q, want %q", c.tag, c.modified, got, c.want)
		}
	}
}

func TestCreated(t *testing.T) {
	t.Parallel()
	now := commit.Add(time.Hour + 500*time.Millisecond)
	for _, c := range []struct {
		epoch  string
		commit time.Time
		want   time.Time
	}{
		{"1700000000", commit, time.Unix(1700000000, 0).UTC()},
		{"", commit, commit},
		{"", time.Time{}, now.Truncate(time.Second)},
	} {
		got, err := created(c.epoch, c.commit, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("created(%q, %v) = %v, %v; want %v", c.epoch, c.commit, got, err, c.want)
		}
	}
	if _, err := created("yesterday", commit, now); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("created(yesterday) = %v, want an error naming SOURCE_DATE_EPOCH", err)
	}
}

func TestTagFor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"v0.0.0-20261130120000-abcdef123456+dirty": "v0.0.0-20261130120000-abcdef123456-dirty",
		"v1.2.3":                 "v1.2.3",
		"(devel)":                "devel",
		"":                       "devel",
		strings.Repeat("a", 200): strings.Repeat("a", 128),
	} {
		got := tagFor(in)
		if got != want {
			t.Errorf("tagFor(%q) = %q, want %q", in, got, want)
		}
		if _, err := name.NewTag("loadreporter:" + got); err != nil {
			t.Errorf("tagFor(%q) = %q is not a valid tag: %v", in, got, err)
		}
	}
}

func TestLdflags(t *testing.T) {
	t.Parallel()
	got, err := ldflags(meta{version: "v1.2.3", revision: "abc", modified: true})
	want := "-s -w -X " + buildinfoPkg + ".version=v1.2.3 -X " + buildinfoPkg + ".revision=abc -X " + buildinfoPkg + ".modified=true"
	if err != nil || got != want {
		t.Errorf("ldflags = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []meta{{version: "v1 2", revision: "abc"}, {version: "v1", revision: `a"b`}, {version: "", revision: "abc"}} {
		if _, err := ldflags(bad); err == nil {
			t.Errorf("ldflags(%+v) succeeded, want an error", bad)
		}
	}
}

func TestCheckStaticRefusesANonELF(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkStatic(p); err == nil {
		t.Error("checkStatic accepted a shell script")
	}
}

// TestImageRoundTrip lays out a fake binary and a CA bundle, writes the
// tarball, reads every tag back and checks the layer, the config and that
// a second build of the same inputs is the same image.
func TestImageRoundTrip(t *testing.T) {
	t.Parallel()
	m := meta{version: "v1.2.3+dirty", revision: "abcdef", modified: true, created: commit, arch: "arm64", sourceURL: "https://example.com/src"}
	files := []file{
		{name: binaryPath, mode: 0o755, data: []byte("\x7fELF not really")},
		{name: caPath, mode: 0o644, data: []byte("-----BEGIN CERTIFICATE-----\n")},
	}
	img, err := newImage(files, m)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	tags, err := writeTarball(out, "loadreporter", m.version, img)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"loadreporter:v1.2.3-dirty", "loadreporter:latest"}; strings.Join(tags, " ") != strings.Join(want, " ") {
		t.Errorf("tags = %q, want %q", tags, want)
	}
	for _, tag := range tags {
		ref, _ := name.NewTag(tag)
		back, err := tarball.ImageFromPath(out, &ref)
		if err != nil {
			t.Fatalf("read %s back: %v", tag, err)
		}
		// What docker load reads: digests, sizes and diff IDs agree. (The
		// in-memory image fails validate only over a nil-versus-empty
		// annotations map that the serialized manifest does not carry.)
		if err := validate.Image(back); err != nil {
			t.Fatalf("%s: validate.Image: %v", tag, err)
		}
		cf, err := back.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != "linux" || cf.Architecture != "arm64" || c.User != user ||
			strings.Join(c.Entrypoint, " ") != "/loadreporter serve" || c.Labels["org.opencontainers.image.version"] != "v1.2.3+dirty" ||
			c.Labels["org.opencontainers.image.created"] != "2026-11-30T12:00:00Z" || !cf.Created.Equal(commit) {
			t.Errorf("%s: config %+v", tag, cf)
		}
	}
	entries := layerEntries(t, img)
	want := "etc 0755\netc/ssl 0755\netc/ssl/certs 0755\netc/ssl/certs/ca-certificates.crt 0644\nloadreporter 0755\n"
	if entries != want {
		t.Errorf("layer entries:\n%s\nwant:\n%s", entries, want)
	}
	again, err := newImage(files, m)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs differ: %s, %s", d1, d2)
	}
}

// layerEntries lists the flattened file system, sorted, one "name mode"
// a line, and fails the test for an entry not owned by root or not dated
// the commit.
func layerEntries(t *testing.T, img v1.Image) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var lines []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(commit) {
			t.Errorf("%s: uid %d gid %d mtime %v, want root and %v", h.Name, h.Uid, h.Gid, h.ModTime, commit)
		}
		lines = append(lines, fmt.Sprintf("%s %04o\n", h.Name, h.Mode))
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}
