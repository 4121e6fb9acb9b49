package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// buildinfoPkg holds the variables the linker sets (see its doc.go).
const buildinfoPkg = "github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"

// ldflags strips the symbol table and stamps the build's identity.
func ldflags(m meta) (string, error) {
	for _, v := range []string{m.version, m.revision} {
		if v == "" || strings.ContainsAny(v, " \t\n'\"\\") {
			return "", fmt.Errorf("version and revision must be non-empty and free of spaces and quotes, got %q", v)
		}
	}
	x := func(name, value string) string { return " -X " + buildinfoPkg + "." + name + "=" + value }
	return "-s -w" + x("version", m.version) + x("revision", m.revision) + x("modified", fmt.Sprint(m.modified)), nil
}

// buildBinary compiles ./cmd/loadreporter into out as a static linux
// binary for arch, and refuses one that would need a dynamic loader
// (the image has none).
func buildBinary(ctx context.Context, root, out, arch string, m meta) error {
	flags, err := ldflags(m)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", flags, "-o", out, "./cmd/loadreporter")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/loadreporter: %v\n%s", err, b)
	}
	return checkStatic(out)
}

// checkStatic fails unless path is an ELF executable without an
// interpreter (PT_INTERP), i.e. one that runs on an empty base.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the image has no loader (build with CGO_ENABLED=0)", path)
		}
	}
	return nil
}
