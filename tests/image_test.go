package tests

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The version and revision the test stamps, to find them again.
const (
	imageVersion  = "v0.0.0-imagetest"
	imageRevision = "0123456789abcdef0123456789abcdef01234567"
)

// TestImage builds the container image as `make image` does, reads the
// tarball back as docker load would, checks what the image promises, and
// runs the binary it carries.
func TestImage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the image: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // seconds when the build cache is warm
	defer cancel()
	out := filepath.Join(t.TempDir(), "loadreporter-image.tar")
	build := exec.CommandContext(ctx, "go", "run", "../cmd/loadimage", "--out", out, "--version", imageVersion, "--revision", imageRevision)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("loadimage: %v\n%s", err, b)
	}

	for _, tag := range []string{"loadreporter:" + imageVersion, "loadreporter:latest"} {
		ref, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &ref)
		if err != nil {
			t.Fatalf("%s is not in the tarball: %v", tag, err)
		}
		if err := validate.Image(img); err != nil {
			t.Fatalf("%s: validate.Image: %v", tag, err)
		}
		if tag != "loadreporter:latest" {
			continue
		}
		checkImageConfig(t, img)
		bin := extractBinary(t, img)
		checkImageBinary(t, ctx, bin)
	}
	inspectWithSkopeo(t, ctx, out)
}

// checkImageConfig: what the container runs, as whom, where it listens,
// and its labels.
func checkImageConfig(t *testing.T, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !slices.Equal(c.Entrypoint, []string{"/loadreporter", "serve"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q; want [/loadreporter serve] and no cmd", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want the numeric non-root 65532:65532", c.User)
	}
	if !slices.Contains(c.Env, "LOADREPORTER_LISTEN=0.0.0.0:8080") {
		t.Errorf("env %q: want LOADREPORTER_LISTEN=0.0.0.0:8080 (listen beyond the container's loopback)", c.Env)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want 8080/tcp", c.ExposedPorts)
	}
	want := map[string]string{
		"org.opencontainers.image.version":  imageVersion,
		"org.opencontainers.image.revision": imageRevision,
		"org.opencontainers.image.source":   "https://github.com/loadreporter/loadreporter",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "loadreporter",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if c.Labels["org.opencontainers.image.description"] == "" {
		t.Error("no org.opencontainers.image.description label")
	}
	created, err := time.Parse(time.RFC3339, c.Labels["org.opencontainers.image.created"])
	if err != nil || !created.Equal(cf.Created.Time) {
		t.Errorf("created label %q (%v), config created %v: want the same RFC 3339 time", c.Labels["org.opencontainers.image.created"], err, cf.Created)
	}
}

// extractBinary finds /loadreporter in the image's file system, checks it
// is a static ELF executable of this machine, and writes it out.
func extractBinary(t *testing.T, img v1.Image) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("no /loadreporter in the image; it holds %q", names)
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.TrimPrefix(h.Name, "/") != "loadreporter" {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
			t.Fatalf("/loadreporter: type %c mode %o, want an executable file", h.Typeflag, h.Mode)
		}
		bin := filepath.Join(t.TempDir(), "loadreporter")
		f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return bin
	}
}

// checkImageBinary: the binary runs on an empty base (ELF, no loader),
// and says the version the image's label says.
func checkImageBinary(t *testing.T, ctx context.Context, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("/loadreporter is not ELF: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/loadreporter asks for a dynamic loader; the image has none")
		}
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		t.Errorf("/loadreporter is ELF type %v, want an executable", f.Type)
	}
	f.Close()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		t.Fatalf("/loadreporter --version: %v", err)
	}
	line := regexp.MustCompile(`^loadreporter ` + regexp.QuoteMeta(imageVersion) + ` \(rev 0123456(-dirty)?, ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)
	if !line.Match(out) {
		t.Errorf("/loadreporter --version printed %q, want it to match %s", out, line)
	}
}

// inspectWithSkopeo reads the tarball with skopeo's docker-archive
// transport (the loader Podman uses) when the machine has skopeo.
func inspectWithSkopeo(t *testing.T, ctx context.Context, tarPath string) {
	t.Helper()
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Log("skopeo not installed: the tarball is checked with go-containerregistry only")
		return
	}
	out, err := exec.CommandContext(ctx, skopeo, "inspect", "docker-archive:"+tarPath+":loadreporter:latest").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = ee.Stderr
		}
		t.Fatalf("skopeo inspect: %v\n%s", err, out)
	}
	var got struct {
		Labels       map[string]string
		Architecture string
		Os           string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("skopeo inspect: %v\n%s", err, out)
	}
	if got.Labels["org.opencontainers.image.version"] != imageVersion || got.Os != "linux" {
		t.Errorf("skopeo sees %+v", got)
	}
}
