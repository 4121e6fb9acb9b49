package client

import (
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/internal/sharedtest"
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
	for _, imp := range sharedtest.ProductionImports(t) {
		if !imp.ThirdParty() {
			continue // the standard library
		}
		ok := false
		for _, a := range allowed {
			ok = ok || imp.Path == strings.TrimSuffix(a, "/") || strings.HasPrefix(imp.Path, a)
		}
		if !ok {
			t.Errorf("%s imports %s", imp.File, imp.Path)
		}
	}
}
