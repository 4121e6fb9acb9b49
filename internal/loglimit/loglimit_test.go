package loglimit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestOneLinePerIntervalWithTheCountHeldBack(t *testing.T) {
	t.Parallel()
	l := Limiter{Every: time.Second}
	t0 := time.Unix(100, 0)
	if ok, n := l.Allow(t0); !ok || n != 0 {
		t.Fatalf("first line: %t %d", ok, n)
	}
	for i := range 3 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i+1) * 100 * time.Millisecond)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if ok, n := l.Allow(t0.Add(time.Second)); !ok || n != 3 {
		t.Fatalf("after the interval: %t %d, want true 3", ok, n)
	}
}

// TestWriterLogsThroughTheSharedLimiter: a write is one warning with the
// message, the attributes, the text and the count held back; a line the
// caller let through the same Limiter holds the next write back.
func TestWriterLogsThroughTheSharedLimiter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := Limiter{Every: time.Second}
	now := time.Unix(100, 0)
	w := NewWriter(slog.New(slog.NewTextHandler(&buf, nil)), &l, func() time.Time { return now }, "front: proxy", "engine", "e:1")
	if ok, _ := l.Allow(now); !ok {
		t.Fatal("the caller's own line held back")
	}
	for range 2 {
		if n, err := w.Write([]byte("a copy cut short\n")); n != 17 || err != nil {
			t.Fatalf("Write: %d %v", n, err)
		}
	}
	now = now.Add(time.Second)
	_, _ = w.Write([]byte("http: proxy error: EOF\n"))
	want := `level=WARN msg="front: proxy" engine=e:1 err="http: proxy error: EOF" suppressed=2`
	if got := strings.TrimSpace(buf.String()); !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 0 {
		t.Fatalf("log:\n%s\nwant one line ending %s", got, want)
	}
}
