package serving

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestServerErrorLogIsRateLimited(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	l := errorLog(slog.New(slog.NewTextHandler(&buf, nil)), time.Second, func() time.Time { return now })
	for i := range 5 {
		l.Print("http: TLS handshake error from 10.0.0.9:4000" + string(rune('0'+i)) + ": EOF\n")
	}
	now = now.Add(time.Second)
	l.Print("http: TLS handshake error from 10.0.0.9:40005: EOF\n")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "TLS handshake error") ||
		!strings.Contains(lines[1], "suppressed=4") {
		t.Fatalf("want one structured line a second with the count held back, got:\n%s", buf.String())
	}
}
