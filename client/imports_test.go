package client

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// What a router imports must not drag in the worker: production files
// import only the standard library, the generated wire code and the
// libraries doc.go names.
func TestImportsOnlyWhatARouterNeeds(t *testing.T) {
	t.Parallel()
	allowed := []string{
		"github.com/loadreporter/loadreporter/gen/",
		"connectrpc.com/connect",
		"google.golang.org/protobuf/",
		"google.golang.org/grpc",
		"github.com/prometheus/client_golang/",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if !strings.Contains(first, ".") {
				continue // the standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || path == strings.TrimSuffix(a, "/") || strings.HasPrefix(path, a)
			}
			if !ok {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
