package httpjson

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWriteErrorIsTheAdaptersErrorShape: the status, JSON never cached,
// and {"error": {"code", "message"}}, the shape the pollers' and the
// front's clients read.
func TestWriteErrorIsTheAdaptersErrorShape(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	WriteError(rec, http.StatusBadGateway, "ENGINE_UNREACHABLE", `engine "e" did not answer`)
	if rec.Code != http.StatusBadGateway || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
	if want := `{"error":{"code":"ENGINE_UNREACHABLE","message":"engine \"e\" did not answer"}}` + "\n"; rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body.String(), want)
	}
}
