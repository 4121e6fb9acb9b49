package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// module is this module's path; its packages are judged by the folder
// they live in (STYLE.md, "The house").
const module = "github.com/loadreporter/loadreporter"

// testLibraries are the third-party modules test code of domain/... and
// ports/porttest may import, where no other third-party code is allowed.
var testLibraries = []string{"go.uber.org/goleak"}

// exceptions are edges the rules forbid that we accept, each with its
// reason. An exception nothing needs any more fails the test, so the list
// cannot outlive its reasons.
var exceptions = []exception{{
	from: "adapters/store/postgres", test: true, imp: "adapters/clock",
	why: "the fault test drives the recorder over real TCP cuts to a real PostgreSQL and needs wall time; " +
		"adapters/clock is the system clock behind ports.Clock (time.Now, timers) and brings no storage or network with it " +
		"(drop this once the test declares its own system clock)",
}}

// TestDependenciesPointInward checks every package's direct imports,
// production and test code alike, against the folder rules. Direct edges
// are enough: domain/... reaches only domain/... and ports/..., which reach
// only domain/..., so no chain of allowed imports leads from the core to an
// adapter, and a failure names the very package and import at fault.
func TestDependenciesPointInward(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; is this the module root?", len(pkgs))
	}
	byPath := map[string]listedPackage{}
	var imports []pkgImports
	for _, p := range pkgs {
		if p.Error != nil {
			t.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		byPath[p.ImportPath] = p
		imports = append(imports, p.pkgImports)
	}
	used := make([]bool, len(exceptions))
	for _, v := range checkImports(imports) {
		if i := slices.IndexFunc(exceptions, func(e exception) bool { return e.excuses(v) }); i >= 0 {
			used[i] = true
			continue
		}
		p := byPath[module+"/"+v.pkg]
		t.Errorf("%s\n\tin %s", v, strings.Join(filesImporting(p, v.kind, v.imp), ", "))
	}
	for i, e := range exceptions {
		if !used[i] {
			t.Errorf("exception %s (test code: %t) -> %s is no longer needed: delete it", e.from, e.test, e.imp)
		}
	}
}

// TestArchitectureRules tests the checker itself on made-up import lists,
// so that a rule is known to fail without planting a bad import in the
// tree.
func TestArchitectureRules(t *testing.T) {
	t.Parallel()
	m := func(rel string) string { return module + "/" + rel }
	for _, tc := range []struct {
		name string
		pkg  pkgImports
		want []string // the violations, as "pkg kind import"
	}{
		{"domain: standard library, domain, ports",
			pkgImports{ImportPath: m("domain/fireloop"), Imports: []string{"context", m("domain"), m("domain/session"), m("ports")}}, nil},
		{"domain: an adapter",
			pkgImports{ImportPath: m("domain/fireloop"), Imports: []string{m("adapters/clock")}},
			[]string{"domain/fireloop production adapters/clock"}},
		{"domain: an adapter in test code",
			pkgImports{ImportPath: m("domain/recorder"), XTestImports: []string{m("domain/recorder"), m("adapters/store/memory")}},
			[]string{"domain/recorder external-test adapters/store/memory"}},
		{"domain: porttest and goleak in test code only",
			pkgImports{ImportPath: m("domain/fireloop"),
				Imports:     []string{m("ports/porttest"), "go.uber.org/goleak"},
				TestImports: []string{m("ports/porttest"), "go.uber.org/goleak"}},
			[]string{"domain/fireloop production ports/porttest", "domain/fireloop production go.uber.org/goleak"}},
		{"domain: other third-party, gen, web, cmd",
			pkgImports{ImportPath: m("domain"), TestImports: []string{"github.com/google/go-cmp/cmp", m("gen/loadreporter/v1"), m("web"), m("cmd/loadreporter/app"), m("tests")}},
			[]string{"domain test github.com/google/go-cmp/cmp", "domain test gen/loadreporter/v1", "domain test web", "domain test cmd/loadreporter/app", "domain test tests"}},
		{"ports: domain only",
			pkgImports{ImportPath: m("ports"), Imports: []string{"context", m("domain/audit"), m("ports/porttest"), "github.com/a-h/templ"}, XTestImports: []string{m("ports")}},
			[]string{"ports production ports/porttest", "ports production github.com/a-h/templ"}},
		{"porttest: domain, ports, test libraries; no adapter",
			pkgImports{ImportPath: m("ports/porttest"), Imports: []string{"testing", m("domain/audit"), m("ports"), "go.uber.org/goleak", m("adapters/store/memory")}},
			[]string{"ports/porttest production adapters/store/memory"}},
		{"porttest split into subpackages",
			pkgImports{ImportPath: m("ports/porttest/historytest"), Imports: []string{m("ports/porttest")}}, nil},
		{"adapter: its own subtree, gen, third-party, porttest in tests",
			pkgImports{ImportPath: m("adapters/source/vllm"),
				Imports:     []string{m("adapters/source/internal/httpfetch"), m("domain"), m("ports"), m("gen/sglang/grpc/scheduler"), "github.com/prometheus/common/expfmt"},
				TestImports: []string{m("adapters/source/internal/sourcetest"), m("ports/porttest")}}, nil},
		{"adapter: another adapter, porttest outside tests",
			pkgImports{ImportPath: m("adapters/store/postgres"),
				Imports:      []string{m("adapters/store/memory"), m("ports/porttest"), m("migrations")},
				XTestImports: []string{m("adapters/store/postgres"), m("adapters/clock")}},
			[]string{"adapters/store/postgres production adapters/store/memory", "adapters/store/postgres production ports/porttest",
				"adapters/store/postgres external-test adapters/clock"}},
		{"adapter: migrations belong to postgres alone",
			pkgImports{ImportPath: m("adapters/store/memory"), Imports: []string{m("migrations")}},
			[]string{"adapters/store/memory production migrations"}},
		{"adapter: another folder's internal, web, cmd",
			pkgImports{ImportPath: m("adapters/rpc"), Imports: []string{m("adapters/source/internal/httpfetch"), m("web"), m("cmd/loadreporter/app")}},
			[]string{"adapters/rpc production adapters/source/internal/httpfetch", "adapters/rpc production web", "adapters/rpc production cmd/loadreporter/app"}},
		{"web: domain, ports, web, third-party; porttest in tests",
			pkgImports{ImportPath: m("web"), Imports: []string{m("web/views"), m("domain/audit"), m("ports"), "github.com/a-h/templ"},
				TestImports: []string{"github.com/PuerkitoBio/goquery", m("ports/porttest")}}, nil},
		{"web: an adapter in test code",
			pkgImports{ImportPath: m("web/audittable"), XTestImports: []string{m("web/audittable"), m("adapters/store/memory")}},
			[]string{"web/audittable external-test adapters/store/memory"}},
		{"web: porttest, gen, cmd in production",
			pkgImports{ImportPath: m("web"), Imports: []string{m("ports/porttest"), m("gen/loadreporter/v1"), m("cmd/loadreporter/app")}},
			[]string{"web production ports/porttest", "web production gen/loadreporter/v1", "web production cmd/loadreporter/app"}},
		{"migrations: standard library only",
			pkgImports{ImportPath: m("migrations"), Imports: []string{"embed", m("domain")}, TestImports: []string{"github.com/jackc/pgx/v5"}},
			[]string{"migrations production domain", "migrations test github.com/jackc/pgx/v5"}},
		{"cmd and tests: anything",
			pkgImports{ImportPath: m("cmd/loadreporter/app"), Imports: []string{m("adapters/store/postgres"), m("web"), "github.com/google/wire"}}, nil},
		{"gen: not checked",
			pkgImports{ImportPath: m("gen/loadreporter/v1"), Imports: []string{m("adapters/rpc")}}, nil},
		{"sharedtest: standard library only",
			pkgImports{ImportPath: m("internal/sharedtest"), Imports: []string{"net/http", "testing", m("domain"), "connectrpc.com/connect"}},
			[]string{"internal/sharedtest production domain", "internal/sharedtest production connectrpc.com/connect"}},
		{"sharedtest in test code only: domain",
			pkgImports{ImportPath: m("domain/recorder"), Imports: []string{m("internal/sharedtest")}, XTestImports: []string{m("internal/sharedtest")}},
			[]string{"domain/recorder production internal/sharedtest"}},
		{"sharedtest in test code only: adapter",
			pkgImports{ImportPath: m("adapters/rpc"), Imports: []string{m("internal/sharedtest")}, TestImports: []string{m("internal/sharedtest")}},
			[]string{"adapters/rpc production internal/sharedtest"}},
		{"sharedtest in test code only: client",
			pkgImports{ImportPath: m("client"), Imports: []string{m("internal/sharedtest")}, TestImports: []string{m("internal/sharedtest")}},
			[]string{"client production internal/sharedtest"}},
		{"loglimit: standard library only, for adapters",
			pkgImports{ImportPath: m("internal/loglimit"), Imports: []string{"log/slog", m("domain"), "connectrpc.com/connect"}},
			[]string{"internal/loglimit production domain", "internal/loglimit production connectrpc.com/connect"}},
		{"loglimit in adapters' production code, not in domain's",
			pkgImports{ImportPath: m("domain/fireloop"), Imports: []string{m("internal/loglimit")}}, []string{"domain/fireloop production internal/loglimit"}},
		{"adapter: internal/loglimit",
			pkgImports{ImportPath: m("adapters/rpc"), Imports: []string{m("internal/loglimit")}}, nil},
		{"a folder without a rule",
			pkgImports{ImportPath: m("internal/util"), Imports: []string{"fmt"}},
			[]string{"internal/util production fmt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The adapter packages the checker sees besides tc.pkg: it tells
			// adapters/source/vllm from adapters/source by them.
			pkgs := []pkgImports{tc.pkg}
			for _, p := range []string{"adapters/clock", "adapters/rpc", "adapters/store/memory", "adapters/source/sim"} {
				if m(p) != tc.pkg.ImportPath {
					pkgs = append(pkgs, pkgImports{ImportPath: m(p)})
				}
			}
			var got []string
			for _, v := range checkImports(pkgs) {
				got = append(got, v.pkg+" "+v.kind.short()+" "+strings.TrimPrefix(v.imp, module+"/"))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
		})
	}

	// A failure names the package, the kind of code, the import and the rule.
	vs := checkImports([]pkgImports{{ImportPath: m("web"), TestImports: []string{m("adapters/store/memory")}}})
	web := rules[slices.IndexFunc(rules, func(r rule) bool { return r.folder == "web" })]
	if want := "web: test code (in-package _test.go) imports " + m("adapters/store/memory") + ", but " + web.may; len(vs) != 1 || vs[0].String() != want {
		t.Errorf("violations = %v\nwant [%s]", vs, want)
	}

	e := exception{from: "adapters/store/postgres", test: true, imp: "adapters/clock"}
	excused := violation{pkg: "adapters/store/postgres", kind: externalTest, imp: module + "/adapters/clock"}
	if !e.excuses(excused) {
		t.Errorf("%+v does not excuse %s", e, excused)
	}
	excused.kind = production
	if e.excuses(excused) {
		t.Errorf("a test-code exception excuses production code: %s", excused)
	}
}

// codeKind tells production code from the two kinds of test code, whose
// imports go list reports apart.
type codeKind int

const (
	production   codeKind = iota // the package's non-test files
	inPackage                    // its _test.go files in the package itself
	externalTest                 // its _test.go files in package p_test
)

func (k codeKind) String() string {
	return [...]string{"production code", "test code (in-package _test.go)", "test code (external _test package)"}[k]
}

func (k codeKind) short() string { return [...]string{"production", "test", "external-test"}[k] }

func (k codeKind) test() bool { return k != production }

// pkgImports is one package's direct imports, per kind of code.
type pkgImports struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// violation is one forbidden import. pkg is module-relative; imp is the
// path as imported.
type violation struct {
	pkg  string
	kind codeKind
	imp  string
	rule string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s imports %s, but %s", v.pkg, v.kind, v.imp, v.rule)
}

// exception is an accepted violation: from's code of the kind (test or
// production) importing imp (module-relative).
type exception struct {
	from string
	test bool
	imp  string
	why  string
}

func (e exception) excuses(v violation) bool {
	return v.pkg == e.from && v.kind.test() == e.test && v.imp == module+"/"+e.imp
}

// dep is an imported package.
type dep struct {
	path  string // as imported
	rel   string // path inside the module
	local bool   // in this module
}

func newDep(path string) dep {
	if path == module {
		return dep{path: path, rel: ".", local: true}
	}
	if rel, ok := strings.CutPrefix(path, module+"/"); ok {
		return dep{path: path, rel: rel, local: true}
	}
	return dep{path: path}
}

// std reports a standard library package: its first path element has no
// dot, as the go command decides for import paths.
func (d dep) std() bool {
	first, _, _ := strings.Cut(d.path, "/")
	return !d.local && !strings.Contains(first, ".")
}

func (d dep) thirdParty() bool { return !d.local && !d.std() }

// in reports whether d is folder or lies below it.
func (d dep) in(folder string) bool {
	return d.local && under(d.rel, folder)
}

// testLibrary reports one of testLibraries or a package inside it.
func (d dep) testLibrary() bool {
	return !d.local && slices.ContainsFunc(testLibraries, func(lib string) bool { return under(d.path, lib) })
}

// sharedTest reports internal/sharedtest, the test plumbing every
// folder's test code may share.
func (d dep) sharedTest() bool { return d.in("internal/sharedtest") }

// port reports ports/... except the test support in ports/porttest.
func (d dep) port() bool { return d.in("ports") && !d.in("ports/porttest") }

func under(path, folder string) bool {
	return path == folder || strings.HasPrefix(path, folder+"/")
}

// layout answers what the rules need to know about the tree.
type layout struct{ pkgs map[string]bool }

// adapter returns the adapter rel belongs to: adapters/X when that is a
// package (adapters/rpc/...), else adapters/X/Y for a folder that only
// groups adapters (adapters/store/memory/...).
func (l layout) adapter(rel string) string {
	parts := strings.Split(rel, "/")
	if len(parts) < 3 || l.pkgs["adapters/"+parts[1]] {
		return strings.Join(parts[:min(2, len(parts))], "/")
	}
	return strings.Join(parts[:3], "/")
}

// internalRoot returns the folder whose tree may import rel, when rel lies
// under an internal folder (the go command's rule, which the adapter rule
// leans on: adapters/source/* share adapters/source/internal/*).
func internalRoot(rel string) (string, bool) {
	parts := strings.Split(rel, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] == "internal" {
			return strings.Join(parts[:i], "/"), true
		}
	}
	return "", false
}

// rule governs the packages in folder and below. allows is nil for
// folders where anything goes.
type rule struct {
	folder string
	may    string // the rule, as failures state it
	allows func(l layout, from string, d dep, test bool) bool
}

// rules are STYLE.md's folder table; the first rule whose folder holds a
// package judges it.
var rules = []rule{
	{folder: "gen", may: "gen/ is generated code and not checked"},
	{folder: "cmd", may: "cmd/ may import anything"},
	{folder: "tests", may: "tests/ may import anything"},
	{
		folder: "internal/sharedtest",
		may:    "internal/sharedtest may import the standard library only",
		allows: func(_ layout, _ string, d dep, _ bool) bool { return d.std() },
	},
	{
		folder: "internal/loglimit",
		may:    "internal/loglimit may import the standard library only",
		allows: func(_ layout, _ string, d dep, _ bool) bool { return d.std() },
	},
	{
		// The port's sorting of connections between grpc-go and net/http:
		// it knows HTTP/2's framing, nothing of the services.
		folder: "internal/connsplit",
		may: "internal/connsplit may import the standard library, domain, internal/loglimit and third-party modules; " +
			"its test code also internal/sharedtest and " + strings.Join(testLibraries, ", "),
		allows: func(_ layout, _ string, d dep, test bool) bool {
			return d.std() || d.thirdParty() || d.in("domain") || d.in("internal/loglimit") ||
				test && (d.sharedTest() || d.testLibrary())
		},
	},
	{
		folder: "ports/porttest",
		may:    "ports/porttest may import the standard library, domain/..., ports/... and " + strings.Join(testLibraries, ", ") + "; never an adapter",
		allows: func(_ layout, _ string, d dep, _ bool) bool {
			return d.std() || d.in("domain") || d.in("ports") || d.testLibrary()
		},
	},
	{
		folder: "ports",
		may:    "ports/... may import the standard library and domain/... only",
		allows: func(_ layout, _ string, d dep, _ bool) bool {
			return d.std() || d.in("domain")
		},
	},
	{
		folder: "domain",
		may: "domain/... may import the standard library, domain/... and ports/... (not ports/porttest); " +
			"its test code also ports/porttest, internal/sharedtest and " + strings.Join(testLibraries, ", "),
		allows: func(_ layout, _ string, d dep, test bool) bool {
			return d.std() || d.in("domain") || d.port() ||
				test && (d.in("ports/porttest") || d.sharedTest() || d.testLibrary())
		},
	},
	{
		folder: "adapters",
		may: "adapters/X/... may import the standard library, domain/..., ports/... (not ports/porttest), gen/..., internal/loglimit, " +
			"third-party modules and its own adapter (with the internal folders above it), never another adapter, web, cmd or tests; " +
			"its test code also ports/porttest and internal/sharedtest; adapters/store/postgres also migrations",
		allows: func(l layout, from string, d dep, test bool) bool {
			switch {
			case d.std(), d.thirdParty(), d.in("domain"), d.port(), d.in("gen"), d.in("internal/loglimit"):
				return true
			case d.in("ports/porttest"), d.sharedTest():
				return test
			case d.in("migrations"):
				// The SQL the PostgreSQL adapter applies: STYLE.md's "its own
				// library" for that adapter.
				return under(from, "adapters/store/postgres")
			case d.in("adapters"):
				if l.adapter(d.rel) == l.adapter(from) {
					return true
				}
				root, ok := internalRoot(d.rel)
				return ok && under(root, "adapters") && under(from, root)
			}
			return false
		},
	},
	{
		folder: "web",
		may: "web/... may import the standard library, domain/..., ports/... (not ports/porttest), web/... " +
			"and third-party modules, never an adapter, gen, cmd or tests; its test code also ports/porttest and internal/sharedtest",
		allows: func(_ layout, _ string, d dep, test bool) bool {
			return d.std() || d.thirdParty() || d.in("domain") || d.port() || d.in("web") ||
				test && (d.in("ports/porttest") || d.sharedTest())
		},
	},
	{
		// The public package for routers: what a router author imports must
		// not drag the service's internals along.
		folder: "client",
		may: "client/... may import the standard library, gen/... and third-party modules, never domain, ports, " +
			"adapters, web or cmd; its test code may boot the service through cmd/loadreporter/app and its ports, " +
			"and use ports/porttest's fake clock and internal/sharedtest",
		allows: func(_ layout, _ string, d dep, test bool) bool {
			return d.std() || d.thirdParty() || d.in("gen") || d.in("client") ||
				test && (d.in("cmd/loadreporter/app") || d.in("domain") || d.in("ports") || d.sharedTest())
		},
	},
	{
		folder: "migrations",
		may:    "migrations may import the standard library only",
		allows: func(_ layout, _ string, d dep, _ bool) bool { return d.std() },
	},
}

// checkImports returns every direct import of pkgs that its folder's rule
// forbids, in the order of pkgs and their import lists. A package in no
// rule's folder is reported once per import, so that a new folder needs a
// rule before it passes.
func checkImports(pkgs []pkgImports) []violation {
	l := layout{pkgs: map[string]bool{}}
	for _, p := range pkgs {
		l.pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = true
	}
	var out []violation
	for _, p := range pkgs {
		from := strings.TrimPrefix(p.ImportPath, module+"/")
		i := slices.IndexFunc(rules, func(r rule) bool { return under(from, r.folder) })
		r := rule{may: "no rule of the architecture test covers " + from + "; add one for its folder",
			allows: func(layout, string, dep, bool) bool { return false }}
		if i >= 0 {
			r = rules[i]
		}
		if r.allows == nil {
			continue
		}
		for kind, imports := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			k := codeKind(kind)
			for _, imp := range imports {
				// An external test package imports the package it tests.
				if imp == p.ImportPath || r.allows(l, from, newDep(imp), k.test()) {
					continue
				}
				out = append(out, violation{pkg: from, kind: k, imp: imp, rule: r.may})
			}
		}
	}
	return out
}

// listedPackage is what go list -json says about a package.
type listedPackage struct {
	pkgImports
	Dir          string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
	Error        *struct{ Err string }
}

// listPackages runs go list over the module, test files included.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-e",
		"-json=ImportPath,Dir,GoFiles,CgoFiles,TestGoFiles,XTestGoFiles,Imports,TestImports,XTestImports,Error", "./...")
	cmd.Dir = ".." // the module root; go test runs in the package's folder
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// filesImporting names the files of p's code of kind k that import imp,
// for the failure message.
func filesImporting(p listedPackage, k codeKind, imp string) []string {
	files := [][]string{append(slices.Clip(p.GoFiles), p.CgoFiles...), p.TestGoFiles, p.XTestGoFiles}[k]
	var out []string
	for _, name := range files {
		path := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, spec := range f.Imports {
			if s, err := strconv.Unquote(spec.Path.Value); err == nil && s == imp {
				out = append(out, filepath.ToSlash(filepath.Join(strings.TrimPrefix(p.ImportPath, module+"/"), name)))
			}
		}
	}
	if out == nil {
		return []string{"(file not found)"}
	}
	return out
}
