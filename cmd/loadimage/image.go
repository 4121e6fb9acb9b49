package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// What the image promises; tests/image_test.go checks each.
const (
	binaryPath = "/loadreporter"
	user       = "65532:65532" // distroless "nonroot": no /etc/passwd needed for a numeric user
	listenEnv  = "LOADREPORTER_LISTEN=0.0.0.0:8080"
	port       = "8080/tcp"
	caPath     = "/etc/ssl/certs/ca-certificates.crt" // where crypto/x509 looks first on Linux
	licenses   = "Apache-2.0"
)

// file is one regular file of the layer.
type file struct {
	name string // absolute path in the image
	mode int64
	data []byte
}

// imageFiles reads the binary and, when given, the CA bundle.
func imageFiles(bin, caBundle string) ([]file, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	files := []file{{name: binaryPath, mode: 0o755, data: b}}
	if caBundle != "" {
		pem, err := os.ReadFile(caBundle)
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle: %w", err)
		}
		if !bytes.Contains(pem, []byte("-----BEGIN CERTIFICATE-----")) {
			return nil, fmt.Errorf("--ca-bundle %s: no PEM certificate in it", caBundle)
		}
		files = append(files, file{name: caPath, mode: 0o644, data: pem})
	}
	return files, nil
}

// layerTar lays files out as one tar, parents first, owned by root and
// dated mtime, so one commit always gives the same bytes.
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.name), "/")
		var parents []string
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// labels are the OCI annotations of the image config.
func labels(m meta) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "loadreporter",
		"org.opencontainers.image.description": "Per-rank load of an LLM inference engine (SGLang, vLLM), pulled once per fire and pushed to every router over SGLang's LoadMonitor stream; GET /v1/loads for polling routers",
		"org.opencontainers.image.version":     m.version,
		"org.opencontainers.image.revision":    m.revision,
		"org.opencontainers.image.source":      m.sourceURL,
		"org.opencontainers.image.licenses":    licenses,
		"org.opencontainers.image.created":     m.created.UTC().Format(time.RFC3339),
	}
}

// newImage puts files on an empty base with the runtime configuration.
func newImage(files []file, m meta) (v1.Image, error) {
	layerBytes, err := layerTar(files, m.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, err
	}
	cf := &v1.ConfigFile{
		Architecture: m.arch,
		OS:           "linux",
		Created:      v1.Time{Time: m.created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint:   []string{binaryPath, "serve"},
			User:         user,
			WorkingDir:   "/",
			Env:          []string{"PATH=/", listenEnv},
			ExposedPorts: map[string]struct{}{port: {}},
			Labels:       labels(m),
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: m.created},
			CreatedBy: "loadimage: " + binaryPath + " " + m.version,
			Comment:   "static loadreporter binary",
		},
	})
}

// notInTag is every character a tag may not hold.
var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// tagFor turns a version into a valid tag: "+dirty" becomes "-dirty",
// "(devel)" becomes "devel", at most 128 characters.
func tagFor(version string) string {
	t := strings.Trim(notInTag.ReplaceAllString(version, "-"), "-.")
	if t == "" {
		t = "devel"
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// writeTarball writes img tagged REPO:VERSION and REPO:latest to path
// (through a temporary file, so a failed build leaves no half tarball).
func writeTarball(out, repo, version string, img v1.Image) ([]string, error) {
	refs := map[name.Reference]v1.Image{}
	var tags []string
	for _, t := range []string{tagFor(version), "latest"} {
		tag, err := name.NewTag(repo + ":" + t)
		if err != nil {
			return nil, fmt.Errorf("tag %s:%s: %w", repo, t, err)
		}
		refs[tag] = img
		tags = append(tags, tag.String())
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".loadimage-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		tmp.Close()
		return nil, err
	}
	if err := tarball.MultiRefWrite(refs, tmp); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	return tags, os.Rename(tmp.Name(), out)
}
