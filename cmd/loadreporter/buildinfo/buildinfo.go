package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by -ldflags "-X github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo.NAME=VALUE";
// empty means "ask the Go build information".
var (
	version  string
	revision string
	modified string // "true" when the tree had uncommitted changes
)

// Unknown stands for a value neither the linker nor the build information
// supplies.
const Unknown = "unknown"

// Info is one build's identity.
type Info struct {
	Version   string // module version, e.g. v0.1.0 or a pseudo-version; "(devel)" for a plain go build
	Revision  string // full VCS revision, or Unknown
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string // toolchain, e.g. go1.26.8
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return resolve(bi, version, revision, modified)
}

// String is the one line `loadreporter --version` prints.
func String() string { return Read().String() }

// String formats i as "loadreporter VERSION (rev SHORT[-dirty], GOVERSION)".
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 7 && rev != Unknown {
		rev = rev[:7]
	}
	if i.Modified {
		rev += "-dirty"
	}
	return "loadreporter " + i.Version + " (rev " + rev + ", " + i.GoVersion + ")"
}

// resolve prefers what the linker set, then what the Go build recorded.
func resolve(bi *debug.BuildInfo, ldVersion, ldRevision, ldModified string) Info {
	i := Info{Version: "(devel)", Revision: Unknown, GoVersion: runtime.Version()}
	if bi != nil {
		if v := bi.Main.Version; v != "" {
			i.Version = v
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if v := strings.TrimSpace(ldVersion); v != "" {
		i.Version = v
	}
	if r := strings.TrimSpace(ldRevision); r != "" {
		i.Revision = r
	}
	if m := strings.TrimSpace(ldModified); m != "" {
		i.Modified = m == "true"
	}
	return i
}
