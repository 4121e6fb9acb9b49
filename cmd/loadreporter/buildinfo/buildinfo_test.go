package buildinfo

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/loadreporter/loadreporter", Version: "v0.0.0-20261130120000-abcdef123456+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "abcdef1234567890abcdef1234567890abcdef12"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	cases := []struct {
		name                string
		bi                  *debug.BuildInfo
		ldVer, ldRev, ldMod string
		want                Info
		wantString          string
	}{
		{
			name:       "no build information",
			want:       Info{Version: "(devel)", Revision: Unknown, GoVersion: runtime.Version()},
			wantString: "loadreporter (devel) (rev unknown, " + runtime.Version() + ")",
		},
		{
			name:       "go build with -buildvcs=false",
			bi:         &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want:       Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.8"},
			wantString: "loadreporter (devel) (rev unknown, go1.26.8)",
		},
		{
			name:       "stamped by the go command",
			bi:         stamped,
			want:       Info{Version: "v0.0.0-20261130120000-abcdef123456+dirty", Revision: "abcdef1234567890abcdef1234567890abcdef12", Modified: true, GoVersion: "go1.26.8"},
			wantString: "loadreporter v0.0.0-20261130120000-abcdef123456+dirty (rev abcdef1-dirty, go1.26.8)",
		},
		{
			name:       "the linker wins",
			bi:         stamped,
			ldVer:      "v1.2.3",
			ldRev:      "0123456789abcdef0123456789abcdef01234567",
			ldMod:      "false",
			want:       Info{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
			wantString: "loadreporter v1.2.3 (rev 0123456, go1.26.8)",
		},
		{
			name:       "a short revision is kept whole",
			bi:         &debug.BuildInfo{GoVersion: "go1.26.8"},
			ldVer:      "v1.2.3",
			ldRev:      "abc",
			ldMod:      "true",
			want:       Info{Version: "v1.2.3", Revision: "abc", Modified: true, GoVersion: "go1.26.8"},
			wantString: "loadreporter v1.2.3 (rev abc-dirty, go1.26.8)",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := resolve(c.bi, c.ldVer, c.ldRev, c.ldMod)
			if got != c.want {
				t.Errorf("resolve = %+v, want %+v", got, c.want)
			}
			if s := got.String(); s != c.wantString {
				t.Errorf("String() = %q, want %q", s, c.wantString)
			}
		})
	}
}

// TestRunningBinary: the test binary has build information of its own;
// whatever it says, the line keeps its shape.
func TestRunningBinary(t *testing.T) {
	t.Parallel()
	line := regexp.MustCompile(`^loadreporter \S+ \(rev [0-9a-z]+(-dirty)?, go[0-9][^)]*\)$`)
	if s := String(); !line.MatchString(s) {
		t.Errorf("String() = %q, want it to match %s", s, line)
	}
	if i := Read(); i.Version == "" || i.Revision == "" {
		t.Errorf("Read() = %+v: want Version and Revision non-empty", i)
	}
}
