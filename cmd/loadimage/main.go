package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// config is what one run is told.
type config struct {
	out       string // the tarball written
	repo      string // image repository name in the tags
	version   string // "" derives it from git
	revision  string // "" derives it from git
	arch      string // GOARCH of the binary and the image
	sourceURL string
	caBundle  string // a PEM bundle copied to /etc/ssl/certs/ca-certificates.crt, or ""
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadimage:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.out, "out", filepath.Join("bin", "loadreporter-image.tar"), "image tarball to write (docker load / podman load format)")
	fs.StringVar(&c.repo, "repo", "loadreporter", "repository name of the image's tags (REPO:VERSION and REPO:latest)")
	fs.StringVar(&c.version, "version", "", "version stamped in the binary, the label and the tag (default: from git)")
	fs.StringVar(&c.revision, "revision", "", "VCS revision stamped in the binary and the label (default: git rev-parse HEAD)")
	fs.StringVar(&c.arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image (the OS is linux)")
	fs.StringVar(&c.sourceURL, "source-url", "https://github.com/loadreporter/loadreporter", "org.opencontainers.image.source label")
	fs.StringVar(&c.caBundle, "ca-bundle", "", "PEM CA bundle to install as /etc/ssl/certs/ca-certificates.crt (only needed for an https engine or database), e.g. /etc/ssl/certs/ca-certificates.crt")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: loadimage [flags]\n\nBuilds the loadreporter container image without a daemon and writes it as a tarball.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("loadimage takes no arguments, got %q", fs.Args())
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	meta, err := describe(ctx, root, c, getenv)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "loadimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "loadreporter")
	if err := buildBinary(ctx, root, bin, c.arch, meta); err != nil {
		return err
	}
	files, err := imageFiles(bin, c.caBundle)
	if err != nil {
		return err
	}
	img, err := newImage(files, meta)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return err
	}
	tags, err := writeTarball(c.out, c.repo, meta.version, img)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s (linux/%s, %s, rev %s)\nload it with: docker load < %s   (or podman load -i %s)\n",
		c.out, strings.Join(tags, " "), meta.arch, digest, meta.revision, c.out, c.out)
	return nil
}
